"""Turn engine generations into the padded, length-bucketed arrays every later phase reads.

Layout per sequence: ``[prompt left-padded to P | response right-padded to R]`` where ``P`` and
``R`` are the longest prompt and response rounded up to a multiple of ``bucket`` — a handful of
distinct shapes, so jitted learner steps are compiled a few times, not every step.

Example (bucket 4, pad 0): prompt ``[5, 6]`` with response ``[7, 2]`` (2 = EOS) gives
``input_ids = [0, 0, 5, 6 | 7, 2, 0, 0]``, ``attention_mask = [0, 0, 1, 1 | 1, 1, 0, 0]``,
``position_ids = [0, 0, 0, 1 | 2, 3, 3, 3]``, ``response_mask = [1, 1, 0, 0]``.

A multi-turn response holds tool-result tokens too (:mod:`relay.agent`): they are attended to
(``attention_mask`` 1) but not trained on (``response_mask`` 0, ``rollout_log_probs`` 0). A response
``[7, r, 2]`` with tool token ``r``: ``attention_mask = [0, 0, 1, 1 | 1, 1, 1, 0]``, ``response_mask = [1, 0, 1, 0]``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from relay.data_proto import DataProto
from relay.engines.base import Generation
from relay.rank_metrics import merge_rank_metrics


def round_up(value: int, multiple: int) -> int:
    return max(multiple, -(-value // multiple) * multiple)


def assemble_rollout(
    prompts: Sequence[Sequence[int]],
    generations: Sequence[Sequence[Generation]],
    pad_token_id: int,
    bucket: int,
    min_prompt_width: int = 0,
) -> dict[str, np.ndarray]:
    """Arrays for ``len(prompts) * n`` sequences, prompt-major (all samples of prompt 0 first).

    The prompt width is at least ``min_prompt_width`` (``data.min_padded_prompt_length``).

    Returns ``prompts`` [B,P] int32, ``responses`` [B,R] int32, ``input_ids`` [B,P+R] int32,
    ``attention_mask`` [B,P+R] int32, ``position_ids`` [B,P+R] int32, ``response_mask`` [B,R] float32 (1 on the
    model's tokens), ``rollout_log_probs`` [B,R] float32 (0 on padding and tool tokens) and ``response_length`` [B]
    int32 (the model's tokens: tool tokens are not counted).
    """
    rows = [(p, g) for p, group in zip(prompts, generations, strict=True) for g in group]
    width_p = round_up(max(min_prompt_width, *(len(p) for p, _ in rows)), bucket)
    width_r = round_up(max(len(g.token_ids) for _, g in rows), bucket)
    b = len(rows)
    prompt_ids = np.full((b, width_p), pad_token_id, np.int32)
    prompt_mask = np.zeros((b, width_p), np.int32)
    responses = np.full((b, width_r), pad_token_id, np.int32)
    response_attention = np.zeros((b, width_r), np.int32)
    response_mask = np.zeros((b, width_r), np.float32)
    log_probs = np.zeros((b, width_r), np.float32)
    for i, (p, g) in enumerate(rows):
        prompt_ids[i, width_p - len(p) :] = p
        prompt_mask[i, width_p - len(p) :] = 1
        n = len(g.token_ids)
        responses[i, :n] = g.token_ids
        response_attention[i, :n] = 1
        response_mask[i, :n] = 1.0 if g.loss_mask is None else g.loss_mask
        log_probs[i, :n] = g.log_probs
    attention_mask = np.concatenate([prompt_mask, response_attention], axis=1)
    position_ids = np.clip(np.cumsum(attention_mask, axis=1) - 1, 0, None).astype(np.int32)
    return {
        "prompts": prompt_ids,
        "responses": responses,
        "input_ids": np.concatenate([prompt_ids, responses], axis=1),
        "attention_mask": attention_mask,
        "position_ids": position_ids,
        "response_mask": response_mask,
        "rollout_log_probs": log_probs,
        "response_length": response_mask.sum(axis=1).astype(np.int32),
    }


def repad_rollout(
    arrays: dict[str, np.ndarray], width_p: int, width_r: int, pad_token_id: int
) -> dict[str, np.ndarray]:
    """The same rollout widened to prompt width ``width_p`` (more left padding) and response width
    ``width_r`` (more right padding), so parts from several engines stack into one batch.

    Example (pad 0): ``input_ids = [0, 5, 6 | 7, 2]`` widened from (3, 2) to (4, 3) is
    ``[0, 0, 5, 6 | 7, 2, 0]``; the positions of real tokens do not change.
    """
    p, r = arrays["prompts"].shape[1], arrays["responses"].shape[1]
    if width_p < p or width_r < r:
        raise ValueError(f"repad_rollout: cannot shrink ({p}, {r}) to ({width_p}, {width_r})")
    left, right = width_p - p, width_r - r
    prompts = np.pad(arrays["prompts"], ((0, 0), (left, 0)), constant_values=pad_token_id)
    attention_mask = np.pad(arrays["attention_mask"], ((0, 0), (left, right)))  # tool tokens stay attended
    responses = np.pad(arrays["responses"], ((0, 0), (0, right)), constant_values=pad_token_id)
    response_mask = np.pad(arrays["response_mask"], ((0, 0), (0, right)))
    out = dict(arrays)
    out.update(
        prompts=prompts,
        responses=responses,
        input_ids=np.concatenate([prompts, responses], axis=1),
        attention_mask=attention_mask,
        position_ids=np.clip(np.cumsum(attention_mask, axis=1) - 1, 0, None).astype(np.int32),
        response_mask=response_mask,
        rollout_log_probs=np.pad(arrays["rollout_log_probs"], ((0, 0), (0, right))),
    )
    return out


def split_rows(n_rows: int, parts: int) -> list[slice]:
    """Consecutive row ranges for ``parts`` workers, sizes differing by at most one (empty ones dropped).

    Example: ``split_rows(10, 3)`` is ``[0:4, 4:7, 7:10]``.
    """
    base, extra = divmod(n_rows, parts)
    out, start = [], 0
    for i in range(parts):
        size = base + (i < extra)
        if size:
            out.append(slice(start, start + size))
        start += size
    return out


def merge_rollout_parts(parts: list[DataProto]) -> DataProto:
    """One batch from the rollouts of several engine replicas (each padded to its own widths).

    Every part is widened to the largest prompt and response widths, then the rows are stacked in
    order; ``meta_info["metrics"]`` becomes the replicas' merged metrics (see ``merge_rank_metrics``).
    """
    if len(parts) == 1:
        return parts[0]
    width_p = max(p.batch["prompts"].shape[1] for p in parts)
    width_r = max(p.batch["responses"].shape[1] for p in parts)
    pad = int(parts[0].meta_info["pad_token_id"])
    widened = [DataProto(repad_rollout(p.batch, width_p, width_r, pad), p.non_tensor, dict(p.meta_info)) for p in parts]
    out = DataProto.concat(widened)
    out.meta_info["prompt_length"] = width_p
    out.meta_info["weights_version"] = min(int(p.meta_info.get("weights_version", 0)) for p in parts)
    out.meta_info["metrics"] = merge_rank_metrics([p.meta_info.get("metrics", {}) for p in parts])
    spans = [span for p in parts for span in p.meta_info.get("tool_spans", [])]
    if spans:
        out.meta_info["tool_spans"] = spans
    return out


def pop_metrics(part: DataProto) -> dict[str, float]:
    """A role's answer carries its metrics in ``meta_info["metrics"]``: take them out (before rows are merged)."""
    return part.meta_info.pop("metrics", {})


def stack_rows(parts: list[DataProto]) -> DataProto:
    """Ranks' row shares stacked in order, the inverse of :func:`split_rows`; their metrics merged
    into ``meta_info["metrics"]``; the stalest rank's ``weights_version`` / ``actor_weights_version``."""
    metrics = merge_rank_metrics([pop_metrics(p) for p in parts])
    out = DataProto.concat(parts) if len(parts) > 1 else parts[0]
    out.meta_info["metrics"] = metrics
    for key in ("weights_version", "actor_weights_version"):
        versions = [p.meta_info[key] for p in parts if key in p.meta_info]
        if versions:
            out.meta_info[key] = min(versions)  # the stalest rank decides
    return out
