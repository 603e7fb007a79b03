"""Golden values for dynamic sampling's pure part: which groups carry signal, how many prompts to add."""

from __future__ import annotations

import numpy as np
import pytest

from relay.grpo.group_filter import extra_pass_size, rows_of, split_groups, unsolved_groups


def test_split_groups_golden() -> None:
    uids = np.array(["a", "a", "b", "b", "c", "c", "d"], dtype=object)
    split = split_groups(np.array([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.5]), uids)
    assert split.signal == [[0, 1]]
    assert split.constant == [[2, 3], [4, 5], [6]]  # a one-sample group has no variance


def test_split_groups_keeps_first_appearance_order_and_tiny_differences() -> None:
    uids = np.array(["x", "y", "x", "y"], dtype=object)  # interleaved groups
    split = split_groups(np.array([0.2, 0.0, 0.2 + 1e-9, 0.0]), uids)
    assert split.signal == [[0, 2]] and split.constant == [[1, 3]]


def test_split_groups_refuses_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="values"):
        split_groups(np.zeros((2, 2)), np.array(["a", "a"], dtype=object))


@pytest.mark.parametrize(
    ("needed", "sampled", "kept", "cap", "expected"),
    [
        (6, 8, 2, 8, 8),  # rate 0.25 -> 24, capped at the batch size
        (1, 8, 6, 8, 2),  # ceil(1 / 0.75)
        (3, 8, 4, 8, 6),  # rate 0.5 -> 6
        (2, 8, 0, 8, 8),  # nothing kept yet: a full pass
        (0, 8, 8, 8, 0),  # nothing needed
        (5, 16, 15, 8, 6),  # at least the deficit: ceil(5 * 16 / 15) = 6
    ],
)
def test_extra_pass_size_golden(needed: int, sampled: int, kept: int, cap: int, expected: int) -> None:
    assert extra_pass_size(needed, sampled, kept, cap) == expected


def test_rows_of() -> None:
    assert rows_of([[4, 5], [0, 1]]).tolist() == [4, 5, 0, 1]
    assert rows_of([]).dtype == np.int64 and rows_of([]).size == 0


def test_unsolved_groups_golden() -> None:
    """The docstring's example: only the group with no right sample is unsolved; an all-right group is solved."""
    uids = np.array(["a", "a", "b", "b", "c", "c"], dtype=object)
    assert unsolved_groups(np.array([0.0, 0.0, 1.0, 0.0, 1.0, 1.0]), uids) == ["a"]
    assert unsolved_groups(np.zeros(6), uids) == ["a", "b", "c"]  # in batch order
    assert unsolved_groups(np.ones(6), uids) == []


def test_unsolved_groups_rejects_misaligned_inputs() -> None:
    with pytest.raises(ValueError, match="expected acc"):
        unsolved_groups(np.zeros(3), np.array(["a", "a"], dtype=object))
