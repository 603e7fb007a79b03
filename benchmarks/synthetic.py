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
    response_mask = mask[:, prompt_len:].astype(np.float32)
    constant = np.full((rows, response_len), -np.log(vocab), np.float32)
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "position_ids": np.clip(np.cumsum(mask, 1) - 1, 0, None).astype(np.int32),
        "response_mask": response_mask,
        "advantages": (rng.normal(size=(rows, 1)) * response_mask).astype(np.float32),
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
