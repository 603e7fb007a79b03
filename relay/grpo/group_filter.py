"""DAPO's dynamic sampling, the pure part: which prompt groups carry a gradient, and how many prompts
an extra rollout pass should sample to refill the ones that do not.

A group whose samples all scored the same has advantage 0 for every sample (the group-relative
baseline equals each score), so it adds nothing to the policy gradient; it only dilutes the loss's
token mean. The driver (``driver/dynamic_sampling.py``) drops such groups and samples more prompts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from relay.grpo.advantage import group_rows


@dataclass(frozen=True)
class GroupSplit:
    """Row indices of a batch's prompt groups, split by whether the group's values vary (in batch order)."""

    signal: list[list[int]]
    constant: list[list[int]]


def split_groups(values: np.ndarray, uids: np.ndarray) -> GroupSplit:
    """Groups (rows sharing a uid) whose ``values`` differ somewhere vs those where all are equal.

    Worked example: values ``[1, 0, 1, 1, 0, 0]`` with uids ``[a, a, b, b, c, c]`` -> signal ``[[0, 1]]``,
    constant ``[[2, 3], [4, 5]]``. A one-sample group is constant (no baseline to compare with).
    """
    values = np.asarray(values)
    if values.ndim != 1 or len(values) != len(uids):
        raise ValueError(f"expected values [B] and uids [B]; got values {values.shape}, uids ({len(uids)},)")
    signal, constant = [], []
    for rows in group_rows(uids):
        (signal if np.ptp(values[rows]) > 0 else constant).append(rows)
    return GroupSplit(signal, constant)


def unsolved_groups(acc: np.ndarray, uids: np.ndarray) -> list[str]:
    """The uids of the groups none of whose samples is right (``acc`` <= 0 in every one), in batch order: the
    zero-pass prompts, which give GRPO no sample to reinforce.

    Worked example: acc ``[0, 0, 1, 0, 1, 1]`` with uids ``[a, a, b, b, c, c]`` -> ``["a"]`` (``b`` has one right
    sample, ``c`` two; an all-right group is solved, not retried).
    """
    acc = np.asarray(acc)
    if acc.ndim != 1 or len(acc) != len(uids):
        raise ValueError(f"expected acc [B] and uids [B]; got acc {acc.shape}, uids ({len(uids)},)")
    return [str(uids[rows[0]]) for rows in group_rows(uids) if np.all(acc[rows] <= 0)]


def extra_pass_size(needed: int, sampled: int, kept: int, cap: int) -> int:
    """Prompts to sample in the next pass to find ``needed`` more groups with signal.

    The deficit divided by the keep rate seen so far in the step (``kept`` of ``sampled`` prompt groups),
    rounded up, at least ``needed`` and at most ``cap`` (the step's batch size); with nothing kept yet,
    ``cap``. Worked example: 6 more wanted after 2 of 8 kept -> rate 0.25 -> 24 -> capped at 8; 1 more
    wanted after 6 of 8 kept -> ceil(1 / 0.75) = 2.
    """
    if needed <= 0:
        return 0
    if kept <= 0 or sampled <= 0:
        return cap
    return min(cap, max(needed, math.ceil(needed * sampled / kept)))


def rows_of(groups: list[list[int]]) -> np.ndarray:
    """The row indices of ``groups``, concatenated in order (an int array, possibly empty)."""
    return np.array([r for rows in groups for r in rows], dtype=np.int64)
