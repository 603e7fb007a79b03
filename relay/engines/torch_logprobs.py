"""Per-token response log-probs with a transformers model (the actor+ref role), on real tokens only.

Same answer as :mod:`relay.models.jax_logprobs` on the padded layout (the hidden state at position
``P - 1 + j`` predicts response token ``j``), computed without the padding: each sequence's real tokens are
packed into rows with a block-diagonal causal mask (:mod:`relay.engines.torch_packing`), and the LM head runs
only on the slots that predict response tokens.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import torch

from relay.engines.torch_packing import PackPlan, block_causal_mask, packed_rows, plan_packing
from relay.packing import HEAD_CHUNK

# Attention implementations that honour a 4D mask passed to the model: sdpa takes it as a boolean
# "may attend" mask, eager adds it to the scores.
PACKED_ATTENTION = ("sdpa", "eager")


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
    """Float32 ``[B, R]`` log-probs of ``input_ids[:, prompt_length:]`` under ``model`` (0 on padding).

    ``model`` is an HF ``*ForCausalLM`` with sdpa (or eager) attention. ``position_ids`` must be the layout's
    ``clip(cumsum(attention_mask) - 1, 0)`` on real tokens: the packed forward restarts every sequence at 0.
    """
    plan = plan_packing(attention_mask, prompt_length)
    check_positions(plan, position_ids)
    return packed_log_probs(model, plan, input_ids, temperature, micro_batch_size)


def check_positions(plan: PackPlan, position_ids: np.ndarray) -> None:
    """Refuse position ids the packed forward would not reproduce (each sequence's own 0, 1, 2, ...)."""
    given = np.asarray(position_ids)[plan.src_row, plan.src_col]
    if not np.array_equal(given, plan.position):
        raise ValueError("position_ids differ from each sequence's 0-based positions on its real tokens")


@torch.no_grad()
def packed_log_probs(
    model: torch.nn.Module,
    plan: PackPlan,
    input_ids: np.ndarray,
    temperature: float = 1.0,
    micro_batch_size: int = 8,
    head_chunk: int = HEAD_CHUNK,
) -> np.ndarray:
    """Float32 ``[B, R]`` response log-probs along ``plan``: ``micro_batch_size`` packed rows per forward.

    The LM head's logits are made ``head_chunk`` response positions at a time, however many response tokens a
    packed micro-batch holds: ``[256, 49152]`` float32 logits are 48 MiB, where the padded forward's
    ``micro_batch_size x R`` positions at once (8 x 256) were 0.4 GiB per copy (the actor_ref's peak RSS, SmolLM2,
    16 sequences: 1.63 -> 1.22 GiB, same values, same time; BENCHMARKS.md "Learner memory").
    """
    width_r = input_ids.shape[1] - plan.prompt_length
    out = np.zeros((input_ids.shape[0], width_r), np.float32)
    device = next(model.parameters()).device  # cpu, or the role's GPU
    chunk = max(1, head_chunk)

    def index(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(device)

    for rows in plan.micro_batches(micro_batch_size):
        hidden = _trunk(model, plan, input_ids, rows, device)
        pick = (plan.pred_row >= rows.start) & (plan.pred_row < rows.stop)
        h = hidden[index(plan.pred_row[pick] - rows.start), index(plan.pred_col[pick])]
        targets = index(input_ids[plan.out_row[pick], plan.out_col[pick] + plan.prompt_length])
        values = torch.cat(list(_head_log_probs(model, h, targets, temperature, chunk)))
        out[plan.out_row[pick], plan.out_col[pick]] = values.cpu().numpy()
    return out


def _trunk(
    model: torch.nn.Module, plan: PackPlan, input_ids: np.ndarray, rows: slice, device: torch.device
) -> torch.Tensor:
    """Last hidden states ``[n, w, hidden]`` of packed rows ``rows``, each segment attending only to itself
    (and each response of a shared prompt to that prompt and itself)."""
    ids, positions, segments, branches = packed_rows(plan, input_ids, rows)
    mask = attention_bias(model, torch.from_numpy(block_causal_mask(segments, branches)))
    return model.model(
        input_ids=torch.from_numpy(ids).to(device),
        attention_mask=mask.to(device),
        position_ids=torch.from_numpy(positions).to(device),
        use_cache=False,
    ).last_hidden_state


def attention_bias(model: torch.nn.Module, allowed: torch.Tensor) -> torch.Tensor:
    """The 4D mask in the form the model's attention reads: boolean for sdpa, additive (0 / dtype min) for eager."""
    impl = getattr(model.config, "_attn_implementation", None)
    if impl not in PACKED_ATTENTION:
        raise ValueError(f"packed log-probs need attn_implementation in {PACKED_ATTENTION}, not {impl!r}")
    if impl == "sdpa":
        return allowed
    dtype = next(model.parameters()).dtype
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)


def _head_log_probs(
    model: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor, temperature: float, chunk: int
) -> Iterator[torch.Tensor]:
    """``log softmax(lm_head(h) / T)[target]`` for each row of ``hidden`` [T, hidden], ``chunk`` rows at a time."""
    for start in range(0, hidden.shape[0], chunk):
        logits = model.lm_head(hidden[start : start + chunk]).float()
        if temperature != 1.0:
            logits.div_(temperature)  # in place: one [chunk, vocab] copy fewer
        picked = logits.gather(-1, targets[start : start + chunk, None]).squeeze(-1)
        yield picked - torch.logsumexp(logits, dim=-1)


def torch_view(array: np.ndarray) -> torch.Tensor:
    """``torch.from_numpy`` for arrays that may be read-only (Ray's object store hands those out);
    the tensor is only ever read (copied into parameters), so torch's writability warning is moot. A bfloat16
    array (ml_dtypes', as JAX exports it; numpy has no bfloat16 of its own) is viewed as its 16-bit words and
    reinterpreted as ``torch.bfloat16``: no copy, the same bits."""
    array = np.asarray(array)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not writable.*")
        if array.dtype.name == "bfloat16":
            return torch.from_numpy(array.view(np.uint16)).view(torch.bfloat16)
        return torch.from_numpy(array)


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
