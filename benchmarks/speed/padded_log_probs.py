"""The actor_ref's log-probs on the padded layout, the baseline the packed forward
(:func:`relay.engines.torch_logprobs.response_log_probs`) is measured against (``benchmarks.speed.actor_ref_packing``)
and tested against (``tests/relay/engines``)."""

from __future__ import annotations

import numpy as np
import torch


@torch.no_grad()
def padded_response_log_probs(
    model: torch.nn.Module,
    input_ids: np.ndarray,
    attention_mask: np.ndarray,
    position_ids: np.ndarray,
    prompt_length: int,
    temperature: float = 1.0,
    micro_batch_size: int = 8,
) -> np.ndarray:
    """The padded forward (every row's ``P + R`` positions, LM head on all ``R``): the reference the packed
    actor_ref forward is tested and benchmarked against. Padding positions hold junk, not 0."""
    out = []
    device = next(model.parameters()).device  # cpu, or the role's GPU

    def tensor(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(device)

    for start in range(0, input_ids.shape[0], micro_batch_size):
        sl = slice(start, start + micro_batch_size)
        ids = tensor(input_ids[sl])
        hidden = model.model(
            input_ids=ids,
            attention_mask=tensor(attention_mask[sl]),
            position_ids=tensor(position_ids[sl]),
            use_cache=False,
        ).last_hidden_state
        h = hidden[:, prompt_length - 1 : -1]
        logits = model.lm_head(h).float() / temperature
        targets = ids[:, prompt_length:]
        log_z = torch.logsumexp(logits, dim=-1)
        picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        out.append((picked - log_z).cpu().numpy())
    return np.concatenate(out, axis=0).astype(np.float32)
