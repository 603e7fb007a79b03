"""Turn engine generations into the padded, length-bucketed arrays every later phase reads.

Layout per sequence: ``[prompt left-padded to P | response right-padded to R]`` where ``P`` and
``R`` are the longest prompt and response rounded up to a multiple of ``bucket`` — a handful of
distinct shapes, so jitted learner steps are compiled a few times, not every step.

Example (bucket 4, pad 0): prompt ``[5, 6]`` with response ``[7, 2]`` (2 = EOS) gives
``input_ids = [0, 0, 5, 6 | 7, 2, 0, 0]``, ``attention_mask = [0, 0, 1, 1 | 1, 1, 0, 0]``,
``position_ids = [0, 0, 0, 1 | 2, 3, 3, 3]``, ``response_mask = [1, 1, 0, 0]``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from relay.engines.base import Generation


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
    ``attention_mask`` [B,P+R] int32, ``position_ids`` [B,P+R] int32, ``response_mask`` [B,R] float32,
    ``rollout_log_probs`` [B,R] float32 (0 on padding) and ``response_length`` [B] int32.
    """
    rows = [(p, g) for p, group in zip(prompts, generations, strict=True) for g in group]
    width_p = round_up(max(min_prompt_width, *(len(p) for p, _ in rows)), bucket)
    width_r = round_up(max(len(g.token_ids) for _, g in rows), bucket)
    b = len(rows)
    prompt_ids = np.full((b, width_p), pad_token_id, np.int32)
    prompt_mask = np.zeros((b, width_p), np.int32)
    responses = np.full((b, width_r), pad_token_id, np.int32)
    response_mask = np.zeros((b, width_r), np.float32)
    log_probs = np.zeros((b, width_r), np.float32)
    for i, (p, g) in enumerate(rows):
        prompt_ids[i, width_p - len(p) :] = p
        prompt_mask[i, width_p - len(p) :] = 1
        n = len(g.token_ids)
        responses[i, :n] = g.token_ids
        response_mask[i, :n] = 1.0
        log_probs[i, :n] = g.log_probs
    attention_mask = np.concatenate([prompt_mask, response_mask.astype(np.int32)], axis=1)
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
