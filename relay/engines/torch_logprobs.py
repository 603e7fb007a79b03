"""Per-token response log-probs with a transformers model (the actor+ref role), LM head on responses only.

Uses the same sequence layout as :mod:`relay.models.jax_logprobs`: the hidden state at
position ``P - 1 + j`` predicts response token ``j``.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch


@torch.no_grad()
def response_log_probs(
    model: torch.nn.Module,
    input_ids: np.ndarray,
    attention_mask: np.ndarray,
    position_ids: np.ndarray,
    prompt_length: int,
    temperature: float = 1.0,
    micro_batch_size: int = 8,
) -> np.ndarray:
    """Float32 ``[B, R]`` log-probs of ``input_ids[:, prompt_length:]`` under ``model``.

    ``model`` is an HF ``*ForCausalLM``; its trunk (``model.model``) runs on the whole sequence
    and its ``lm_head`` only on the ``R`` positions that predict response tokens.
    """
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


def torch_view(array: np.ndarray) -> torch.Tensor:
    """``torch.from_numpy`` for arrays that may be read-only (Ray's object store hands those out);
    the tensor is only ever read (copied into parameters), so torch's writability warning is moot."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not writable.*")
        return torch.from_numpy(np.asarray(array))


def load_named_tensors(model: torch.nn.Module, tensors: dict[str, np.ndarray]) -> int:
    """Copy HF-named arrays into ``model``'s parameters in place; return the bytes copied.

    Every parameter must be covered, except ``lm_head.weight`` when it is tied to the
    embedding (it is the same tensor). Unknown names are an error, never silently dropped.
    """
    params = dict(model.named_parameters())
    unknown = sorted(set(tensors) - set(params))
    if unknown:
        raise KeyError(f"weights not in the model: {unknown[:5]}{' …' if len(unknown) > 5 else ''}")
    tied = getattr(model.config, "tie_word_embeddings", False)
    missing = sorted(n for n in params if n not in tensors and not (tied and n == "lm_head.weight"))
    if missing:
        raise KeyError(f"weights missing for: {missing[:5]}{' …' if len(missing) > 5 else ''}")
    nbytes = 0
    with torch.no_grad():
        for name, value in tensors.items():
            target = params[name]
            if tuple(target.shape) != tuple(value.shape):
                raise ValueError(f"{name}: shape {tuple(value.shape)} != model's {tuple(target.shape)}")
            target.copy_(torch_view(value))
            nbytes += value.nbytes
    return nbytes
