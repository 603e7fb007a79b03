"""REINFORCE++ advantages (Hu et al. 2025, "REINFORCE++: A Simple and Efficient Approach for Aligning Large Language
Models"): returns whitened over every response token of the batch instead of normalised within a prompt's group.

Registered as ``reinforce_plus_plus`` and ``reinforce_plus_plus_baseline`` in
:data:`relay.grpo.advantage.ADVANTAGE_ESTIMATORS` (numpy, on the driver).
"""

from __future__ import annotations

import numpy as np

from relay.grpo.advantage import (
    DEFAULTS,
    AdvantageOptions,
    Advantages,
    checked_inputs,
    group_rows,
    register_advantage,
)

# Added to the variance before the square root of the whitening (as verl's masked_whiten).
WHITEN_EPSILON = 1e-8


def masked_whiten(values: np.ndarray, mask: np.ndarray, epsilon: float = WHITEN_EPSILON) -> np.ndarray:
    """``(v - mean) / sqrt(var + epsilon)`` over the entries where ``mask`` > 0, with the unbiased (n - 1)
    variance; 0 where the mask is 0. Fewer than two masked entries: their values minus the mean (0), unscaled.

    Worked example: values ``[[1, 1], [0, 9]]``, mask ``[[1, 1], [1, 0]]``: masked entries 1, 1, 0, mean 2/3,
    variance ((1/3)^2 + (1/3)^2 + (2/3)^2) / 2 = 1/3, so ``[[0.5774, 0.5774], [-1.1547, 0]]``.
    """
    values = np.asarray(values, dtype=np.float64)
    keep = np.asarray(mask) > 0
    count = int(keep.sum())
    if count == 0:
        return np.zeros_like(values)
    mean = values[keep].mean()
    centered = np.where(keep, values - mean, 0.0)
    if count < 2:
        return centered
    var = float((centered[keep] ** 2).sum() / (count - 1))
    return centered / np.sqrt(var + epsilon)


def discounted_returns(scores: np.ndarray, response_mask: np.ndarray, gamma: float) -> np.ndarray:
    """Token returns ``G_t = gamma^(T - 1 - t) * s`` of an outcome reward ``s`` given at the last response token
    ``T - 1`` (the reward-to-go of a sequence whose only reward is at its end); 0 on padding.

    Worked example: score 1, three response tokens, gamma 0.5 -> [0.25, 0.5, 1.0]; gamma 1 -> [1, 1, 1].
    """
    mask = np.asarray(response_mask) > 0
    lengths = mask.sum(axis=1)
    # Steps to the sequence's last response token, for a right-padded response (tokens 0 .. T-1).
    to_end = lengths[:, None] - 1 - np.arange(mask.shape[1])[None, :]
    returns = np.asarray(scores, dtype=np.float64)[:, None] * np.power(float(gamma), np.maximum(to_end, 0))
    return np.where(mask, returns, 0.0)


def _sequence_means(token_adv: np.ndarray, response_mask: np.ndarray) -> np.ndarray:
    mask = np.asarray(response_mask) > 0
    return (token_adv * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1)


@register_advantage("reinforce_plus_plus")
def reinforce_plus_plus_advantage(
    scores: np.ndarray, uids: np.ndarray, response_mask: np.ndarray, options: AdvantageOptions = DEFAULTS
) -> Advantages:
    """REINFORCE++: token returns of the outcome score (:func:`discounted_returns`, ``algorithm.gamma``), whitened
    over all response tokens of the batch (:func:`masked_whiten`). No per-prompt baseline: the batch mean is the
    baseline, so prompts whose samples all scored high still push up (the paper's argument: less overfitting to
    easy prompts than a group baseline). Reads ``options.gamma`` only.

    Worked example: scores [1, 0], response lengths 2 and 1, gamma 1: returns ``[[1, 1], [0, pad]]``, whitened
    (mean 2/3, unbiased variance 1/3) -> ``[[0.5774, 0.5774], [-1.1547, 0]]``; sequence advantages (token means)
    [0.5774, -1.1547].

    Returns:
        (token advantages [B, R] float32, their per-sequence means [B] float32).
    """
    scores, response_mask = checked_inputs(scores, uids, response_mask)
    token_adv = masked_whiten(discounted_returns(scores, response_mask, options.gamma), response_mask)
    return token_adv.astype(np.float32), _sequence_means(token_adv, response_mask).astype(np.float32)


@register_advantage("reinforce_plus_plus_baseline")
def reinforce_plus_plus_baseline_advantage(
    scores: np.ndarray, uids: np.ndarray, response_mask: np.ndarray, options: AdvantageOptions = DEFAULTS
) -> Advantages:
    """REINFORCE++ with a group baseline: each score minus its group's mean (as ``grpo_mean``), broadcast to the
    response tokens, then whitened over all response tokens of the batch (:func:`masked_whiten`): the group mean
    removes the prompt's difficulty and the batch whitening, not a per-group std, sets the scale. Groups of one
    sample keep their score minus itself (0). Reads no option.

    Worked example: groups ``a: [1, 0]`` and ``b: [1, 1]``, every response 1 token: centred [0.5, -0.5, 0, 0];
    mean 0, unbiased variance (0.25 + 0.25) / 3 = 1/6, std 0.40825 -> [1.2247, -1.2247, 0, 0].

    Returns:
        (token advantages [B, R] float32, their per-sequence means [B] float32).
    """
    scores, response_mask = checked_inputs(scores, uids, response_mask)
    centered = scores.copy()
    for rows in group_rows(uids):
        centered[rows] = scores[rows] - scores[rows].mean()
    token_adv = masked_whiten(centered[:, None] * (np.asarray(response_mask) > 0), response_mask)
    return token_adv.astype(np.float32), _sequence_means(token_adv, response_mask).astype(np.float32)
