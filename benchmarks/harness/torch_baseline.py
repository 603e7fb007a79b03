"""The torch baseline of the learner benchmarks: the same GRPO update as Relay's learner, written with transformers.

Per step, on the rows :func:`relay.packing.layout_rows` makes of a batch (the same rows the JAX learner computes
on): the forward of every micro-batch of ``micro`` rows with the same block-diagonal causal (and branch) mask through
SDPA, the LM head on the response slots only, the clipped policy loss (token mean) plus a low-variance KL term, the
backward, gradient clipping at 1.0 and one AdamW step. On a GPU (:class:`TorchSettings`): float32 master weights under
bfloat16 autocast, gradient checkpointing and the fused AdamW, the usual fast torch recipe.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class TorchSettings:
    """Where and how the baseline runs: ``device`` (``cpu``/``cuda``), ``autocast`` (``bfloat16`` or None: float32),
    ``checkpointing`` (transformers' gradient checkpointing), ``fused_adamw`` (CUDA only)."""

    device: str = "cpu"
    autocast: str | None = None
    checkpointing: bool = False
    fused_adamw: bool = False


def block_bias(rows: dict[str, Any], dtype: Any) -> Any:
    """The additive ``[rows, 1, T, T]`` mask of packed rows: 0 where a token may attend (same segment, causal, same
    branch or the prompt), the dtype's minimum elsewhere; padding rows attend to themselves (no NaN)."""
    import torch

    seg, branch = rows["segment_ids"], rows["branch_ids"]
    t = seg.shape[1]
    causal = torch.ones(t, t, dtype=torch.bool, device=seg.device).tril()
    real_key = (seg[:, None, :] > 0) | torch.eye(t, dtype=torch.bool, device=seg.device)
    same_branch = (branch[:, None, :] == 0) | (branch[:, :, None] == branch[:, None, :])
    allowed = causal & (seg[:, :, None] == seg[:, None, :]) & same_branch & real_key
    bias = torch.zeros(allowed.shape, dtype=dtype, device=seg.device)
    return bias.masked_fill(~allowed, torch.finfo(dtype).min)[:, None]


def torch_grpo_steps(
    model_dir: str,
    batch: dict[str, np.ndarray],
    prompt: int,
    micro: int,
    repeats: int,
    width: int,
    settings: TorchSettings,
    share: bool = False,
) -> dict[str, Any]:
    """``repeats`` timed GRPO steps after one warm-up; ``{"seconds": [...]}`` (and the CUDA allocator's peak bytes on
    a GPU)."""
    import torch
    from transformers import AutoModelForCausalLM

    from relay.packing import layout_rows

    device = torch.device(settings.device)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    model.to(device).train()
    if settings.checkpointing:
        model.gradient_checkpointing_enable()
    fused = {"fused": True} if settings.fused_adamw else {}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, **fused)
    rows, _ = layout_rows(batch, prompt, packing=width > 0, width=width or None, share_prompts=share)
    t = {k: torch.from_numpy(np.asarray(v)).to(device) for k, v in rows.items()}
    compute = getattr(torch, settings.autocast) if settings.autocast else torch.float32
    bias, tokens = block_bias(t, compute), t["slot_mask"].sum()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        for lo in range(0, t["input_ids"].shape[0], micro):
            with torch.autocast(device.type, dtype=compute, enabled=settings.autocast is not None):
                loss = _micro_loss(model, t, slice(lo, lo + micro), bias, tokens)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    step()  # warm-up (allocations, AdamW state)
    seconds = []
    for _ in range(repeats):
        _synchronize(device)
        start = time.perf_counter()
        step()
        _synchronize(device)
        seconds.append(time.perf_counter() - start)
    out: dict[str, Any] = {"seconds": seconds}
    if device.type == "cuda":
        out["peak_bytes"] = int(torch.cuda.max_memory_allocated(device))
    return out


def _micro_loss(model: Any, t: dict[str, Any], sl: slice, bias: Any, tokens: Any) -> Any:
    """One micro-batch's share of the step's loss: clipped ratio (token mean over the step) + 0.001 x low-var KL."""
    import torch

    hidden = model.model(
        input_ids=t["input_ids"][sl].long(),
        attention_mask=bias[sl],
        position_ids=t["position_ids"][sl].long(),
        use_cache=False,
    ).last_hidden_state
    h = hidden.gather(1, t["slot_index"][sl].long()[..., None].expand(-1, -1, hidden.shape[-1]))
    logits = model.lm_head(h).float()
    log_probs = torch.log_softmax(logits, -1).gather(-1, t["targets"][sl].long()[..., None]).squeeze(-1)
    ratio = torch.exp(log_probs - log_probs.detach())
    adv, mask = t["advantages"][sl], t["slot_mask"][sl]
    pg = torch.maximum(-adv * ratio, -adv * ratio.clamp(0.8, 1.2))
    d = (t["ref_log_probs"][sl] - log_probs).clamp(-20, 20)
    kl = (torch.exp(d) - d - 1).clamp(-10, 10)
    return ((pg + 0.001 * kl) * mask).sum().div(tokens)


def _synchronize(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
