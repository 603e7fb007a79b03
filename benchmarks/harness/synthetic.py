"""A synthetic training batch in the learner's layout, for tests and benchmarks (no rollout needed).

Rows are ``[prompt left-padded to P | response right-padded to R]`` like a real rollout: the first
half of the rows have 3 prompt pads, every other row stops its response after 5 tokens, and each
row has one advantage on all of its response tokens.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def synthetic_batch(
    rows: int, prompt_len: int, response_len: int, vocab: int, seed: int = 0, group: int = 1
) -> dict[str, np.ndarray]:
    """``input_ids``/``attention_mask``/``position_ids`` [rows, P+R]; ``response_mask``, ``advantages``,
    ``ref_log_probs``, ``rollout_log_probs``, ``old_log_probs`` [rows, R]. ``group`` > 1: consecutive rows come
    in groups of that many samples of one prompt (GRPO's ``n``), each group's prompt its first row's."""
    rng = np.random.default_rng(seed)
    width = prompt_len + response_len
    ids = rng.integers(3, vocab, (rows, width)).astype(np.int32)
    mask = np.ones((rows, width), np.int32)
    mask[: rows // 2, : min(3, prompt_len - 1)] = 0
    first = np.arange(rows) // group * group  # each row's group leader
    ids[:, :prompt_len], mask[:, :prompt_len] = ids[first, :prompt_len], mask[first, :prompt_len]
    mask[::2, prompt_len + min(5, response_len) :] = 0
    return rollout_layout(ids, mask, prompt_len, rng.normal(size=rows), vocab)


def rollout_layout(
    ids: np.ndarray, mask: np.ndarray, prompt_width: int, sequence_advantages: np.ndarray, vocab: int
) -> dict[str, np.ndarray]:
    """The learner's batch of token ``ids`` under ``mask`` (prompts in the first ``prompt_width`` columns): positions
    from the mask, each sequence's advantage on its response tokens, and ref / old / rollout log-probs of
    ``-log(vocab)`` (a random model's)."""
    response_mask = mask[:, prompt_width:].astype(np.float32)
    constant = np.full(response_mask.shape, -np.log(vocab), np.float32)
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "position_ids": np.clip(np.cumsum(mask, 1) - 1, 0, None).astype(np.int32),
        "response_mask": response_mask,
        "advantages": (np.reshape(sequence_advantages, (-1, 1)) * response_mask).astype(np.float32),
        "ref_log_probs": constant,
        "rollout_log_probs": constant.copy(),
        "old_log_probs": constant.copy(),
    }


def adamw_section(lr: float, clip_norm: float = 1e9) -> dict[str, Any]:
    """A ``train.optimizer`` section: AdamW at a constant ``lr``."""
    return {
        "name": "adamw",
        "clip_norm": clip_norm,
        "weight_decay": 0.0,
        "b1": 0.9,
        "b2": 0.999,
        "eps": 1e-8,
        "lr_schedule": {
            "type": "constant",
            "peak_value": lr,
            "warmup_ratio": 0.0,
            "warmup_steps": None,
            "init_value": 0.0,
            "end_value": 0.0,
        },
    }


def grpo_batch(
    prompts: int,
    n: int,
    prompt_range: tuple[int, int],
    response_range: tuple[int, int],
    vocab: int,
    seed: int = 0,
) -> tuple[dict[str, np.ndarray], int]:
    """A GRPO step's batch in the rollout's layout, with lengths drawn uniformly from the ranges (inclusive):
    ``prompts`` prompts left-padded to the longest allowed, each sampled ``n`` times, responses right-padded.
    Advantages are group-relative (each group's draws standardised); the ref / old / rollout log-probs are
    ``-log(vocab)`` (a random model's). Returns the batch and its prompt width.

    Worked example: ``grpo_batch(16, 8, (128, 256), (64, 512), vocab)`` is the GPU benchmark's step: 128 sequences,
    ~61k real tokens on average (16 x 192 prompt tokens counted once per sample, 128 x 288 response tokens).
    """
    rng = np.random.default_rng(seed)
    width_p, width_r = prompt_range[1], response_range[1]
    rows = prompts * n
    ids = rng.integers(3, vocab, (rows, width_p + width_r)).astype(np.int32)
    mask = np.zeros_like(ids)
    prompt_lengths = np.repeat(rng.integers(prompt_range[0], prompt_range[1] + 1, prompts), n)
    response_lengths = rng.integers(response_range[0], response_range[1] + 1, rows)
    for i in range(rows):
        ids[i, :width_p] = ids[i - i % n, :width_p]  # the group's prompt
        mask[i, width_p - prompt_lengths[i] : width_p + response_lengths[i]] = 1
    scores = rng.normal(size=(prompts, n))
    advantages = (scores - scores.mean(1, keepdims=True)) / (scores.std(1, keepdims=True) + 1e-6)
    return rollout_layout(ids, mask, width_p, advantages.reshape(rows), vocab), width_p
