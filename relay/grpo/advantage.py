"""Outcome advantages (numpy, run on the driver) and the registry of estimators (``algorithm.adv_estimator``).

Every estimator is ``fn(scores [B], uids [B], response_mask [B, R], options: AdvantageOptions) -> (token advantages
[B, R], sequence advantages [B])``; each reads the options it needs (its docstring says which). Group baselines live
here (``grpo``, ``grpo_mean``, ``rloo``); the batch-whitened REINFORCE++ family in :mod:`relay.grpo.reinforce`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from relay.grpo.registry import Registry


@dataclass(frozen=True)
class AdvantageOptions:
    """The estimators' options: ``algorithm.norm_adv_by_std`` and ``algorithm.gamma``, the std's ``epsilon``, and for
    ``remax`` the batch's greedy-response rewards ``baselines`` [B]."""

    norm_by_std: bool = True
    epsilon: float = 1e-6
    gamma: float = 1.0
    baselines: np.ndarray | None = None


DEFAULTS = AdvantageOptions()
# (token advantages [B, R] float32, sequence advantages [B] float32)
Advantages = tuple[np.ndarray, np.ndarray]
AdvantageEstimator = Callable[[np.ndarray, np.ndarray, np.ndarray, AdvantageOptions], Advantages]

ADVANTAGE_ESTIMATORS: Registry[AdvantageEstimator] = Registry("advantage estimator")
register_advantage = ADVANTAGE_ESTIMATORS.register
get_advantage_estimator = ADVANTAGE_ESTIMATORS.get


def group_rows(uids: np.ndarray) -> list[list[int]]:
    """Row indices grouped by uid, in order of first appearance (uids need only be hashable)."""
    groups: dict[Hashable, list[int]] = defaultdict(list)
    for row, uid in enumerate(uids):
        groups[uid].append(row)
    return list(groups.values())


def per_token(seq_adv: np.ndarray, response_mask: np.ndarray) -> Advantages:
    """Each sequence's advantage on every one of its response tokens, and the sequence advantages, as float32."""
    return (seq_adv[:, None] * response_mask).astype(np.float32), seq_adv.astype(np.float32)


def checked_inputs(scores: Any, uids: Any, response_mask: Any) -> tuple[np.ndarray, np.ndarray]:
    """``scores`` as float64 and ``response_mask`` as an array, after :func:`_check_shapes`: every estimator's
    first line."""
    scores, response_mask = np.asarray(scores, dtype=np.float64), np.asarray(response_mask)
    _check_shapes(scores, uids, response_mask)
    return scores, response_mask


def _check_shapes(scores: np.ndarray, uids: np.ndarray, response_mask: np.ndarray) -> None:
    """Raise ValueError unless scores is [B], uids is [B] and response_mask is [B, R]."""
    same_length = len(uids) == len(scores) == len(response_mask)
    if scores.ndim != 1 or response_mask.ndim != 2 or not same_length:
        raise ValueError(
            f"expected scores [B], uids [B], response_mask [B, R]; got scores {scores.shape}, "
            f"uids ({len(uids)},), response_mask {response_mask.shape}"
        )


@register_advantage("grpo")
def grpo_outcome_advantage(
    scores: np.ndarray, uids: np.ndarray, response_mask: np.ndarray, options: AdvantageOptions = DEFAULTS
) -> Advantages:
    """GRPO outcome advantage: each sequence's score normalised within its group (same ``uid``).

    ``A_i = (s_i - mean_g) / (std_g + epsilon)`` (or ``s_i - mean_g`` if not ``norm_by_std``), where
    ``std_g`` is the sample standard deviation (ddof=1, as verl and TRL use). A group of size 1 has no
    baseline to compare against (and its ddof=1 std is undefined), so it gets advantage 0. A group whose
    scores are all equal also gets 0 (the numerator is 0). Every response token of sequence ``i`` gets
    ``A_i``; padding tokens get 0.

    Worked example: scores [1, 0, 0, 1] in one group: mean 0.5, std = sqrt((4 * 0.25) / 3) = 0.57735,
    so A = 0.5 / 0.57735 = +-0.86603 -> [0.86603, -0.86603, -0.86603, 0.86603].

    Args:
        scores: [B] float, one outcome reward per sequence.
        uids: [B] object, the prompt id; sequences sampled from the same prompt share it.
        response_mask: [B, R], 1 on response tokens, 0 on padding.
        options: ``norm_by_std`` divides by the group std (GRPO) or only subtracts the group mean (Dr. GRPO);
            ``epsilon`` is added to the std; ``gamma`` is not read (an outcome advantage has no per-token discount).

    Returns:
        (token advantages [B, R] float32, sequence advantages [B] float32).
    """
    scores, response_mask = checked_inputs(scores, uids, response_mask)
    seq_adv = np.zeros_like(scores)
    for rows in group_rows(uids):
        if len(rows) < 2:
            continue
        group = scores[rows]
        centered = group - group.mean()
        seq_adv[rows] = centered / (group.std(ddof=1) + options.epsilon) if options.norm_by_std else centered
    return per_token(seq_adv, response_mask)


@register_advantage("grpo_mean")
def grpo_mean_advantage(
    scores: np.ndarray, uids: np.ndarray, response_mask: np.ndarray, options: AdvantageOptions = DEFAULTS
) -> Advantages:
    """The mean-only variant (Dr. GRPO): ``A_i = s_i - mean_g``, whatever ``norm_by_std`` says.

    Worked example: scores [1, 0, 0, 1] in one group -> [0.5, -0.5, -0.5, 0.5].
    """
    return grpo_outcome_advantage(scores, uids, response_mask, replace(options, norm_by_std=False))


@register_advantage("rloo")
def rloo_advantage(
    scores: np.ndarray, uids: np.ndarray, response_mask: np.ndarray, options: AdvantageOptions = DEFAULTS
) -> Advantages:
    """RLOO (Ahmadian et al. 2024, "Back to Basics: Revisiting REINFORCE Style Optimization for Learning from Human
    Feedback"; Kool et al. 2019): each sample's baseline is the mean score of the OTHER samples of its group,
    ``A_i = s_i - (sum_g - s_i) / (n - 1) = n / (n - 1) * (s_i - mean_g)``. Unbiased (the baseline does not depend on
    the sample itself) and not divided by a std. Groups of one sample get 0; ``norm_by_std``, ``epsilon`` and
    ``gamma`` are not read.

    Worked example: scores [1, 0, 0, 1] in one group: the other three of sample 0 average (0 + 0 + 1) / 3 = 1/3, so
    ``A_0 = 2/3``; sample 1's others average 2/3, ``A_1 = -2/3`` -> [0.6667, -0.6667, -0.6667, 0.6667].
    """
    scores, response_mask = checked_inputs(scores, uids, response_mask)
    seq_adv = np.zeros_like(scores)
    for rows in group_rows(uids):
        n = len(rows)
        if n < 2:
            continue
        group = scores[rows]
        seq_adv[rows] = group - (group.sum() - group) / (n - 1)
    return per_token(seq_adv, response_mask)


@register_advantage("remax")
def remax_advantage(
    scores: np.ndarray, uids: np.ndarray, response_mask: np.ndarray, options: AdvantageOptions = DEFAULTS
) -> Advantages:
    """ReMax (Li et al. 2024, "ReMax: A Simple, Effective, and Efficient Reinforcement Learning Method for Aligning
    Large Language Models"): ``A_i = s_i - b_i`` with ``b_i`` the reward of ONE GREEDY response to sample ``i``'s
    prompt (``baselines`` [B], each row its prompt's; the rollout samples the greedy responses as an extra
    request, and they are not trained on). Not divided by a std; ``uids``, ``norm_by_std``, ``epsilon`` and
    ``gamma`` are not read.

    Worked example: a prompt whose greedy answer scored 1 and samples that scored [1, 0, 0, 1] -> [0, -1, -1, 0]
    (no sample beat the greedy answer); greedy 0 -> [1, 0, 0, 1].
    """
    scores, response_mask = checked_inputs(scores, uids, response_mask)
    baselines = options.baselines
    if baselines is None or np.shape(baselines) != scores.shape:
        raise ValueError(f"remax needs baselines [B] (the greedy responses' rewards); got {np.shape(baselines)}")
    seq_adv = scores - np.asarray(baselines, dtype=np.float64)
    return per_token(seq_adv, response_mask)
