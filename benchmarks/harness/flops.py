"""The model FLOPs of a training step on its real tokens, the numerator of the learner benchmarks' MFU (on the CPU in
:mod:`benchmarks.speed.learner`, on a GPU in :mod:`benchmarks.gpu.learner`)."""

from __future__ import annotations

import numpy as np


def step_flops(cfg: dict, sequence_lengths: np.ndarray, response_tokens: float) -> float:
    """Model FLOPs of one training step (forward + backward = 3x forward) on the REAL tokens: padding and
    the masked half of causal attention do not count, whatever layout a learner computes on.

    Per token: 2 x the decoder's matmul parameters; attention scores and mixing: 4 x L x head_dim x heads
    per token per layer for a sequence of L tokens, halved for causality; the LM head (2 x vocab x hidden)
    only on response tokens.
    """
    h, inter, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    d = cfg.get("head_dim") or h // heads
    per_layer = h * heads * d + 2 * h * kv * d + heads * d * h + 3 * h * inter
    lengths = np.asarray(sequence_lengths, np.float64)
    forward = 2 * per_layer * layers * lengths.sum() + 2 * d * heads * layers * float((lengths**2).sum())
    forward += 2 * cfg["vocab_size"] * h * float(response_tokens)
    return 3.0 * forward
