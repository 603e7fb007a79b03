"""Tests for relay.tasks.countdown: seeded generation, questions and the ground-truth encoding."""

from __future__ import annotations

import re

import pytest

from relay.scoring.countdown import evaluate_countdown, grade
from relay.tasks.countdown import (
    countdown_ground_truth,
    countdown_question,
    generate_countdown,
    parse_countdown_ground_truth,
)

# The first rows of seed 0 with the defaults (3 numbers in [1, 20], target <= 1000).
GOLDEN_SEED_0 = [
    {"uid": "countdown-0-0", "numbers": [18, 13, 11], "target": 42, "solution": "13 + 11 + 18"},
    {"uid": "countdown-0-1", "numbers": [11, 18, 20], "target": 27, "solution": "18 - 11 + 20"},
    {"uid": "countdown-0-2", "numbers": [20, 2, 6], "target": 7, "solution": "(20 - 6) / 2"},
]


def test_golden_rows() -> None:
    assert generate_countdown(3, seed=0) == GOLDEN_SEED_0


def test_deterministic_for_a_seed() -> None:
    assert generate_countdown(50, seed=7) == generate_countdown(50, seed=7)
    assert generate_countdown(50, seed=7) != generate_countdown(50, seed=8)


def test_row_does_not_depend_on_count() -> None:
    long = generate_countdown(40, seed=3, numbers=4, high=50)
    assert generate_countdown(10, seed=3, numbers=4, high=50) == long[:10]
    assert generate_countdown(0, seed=3) == []


@pytest.mark.parametrize(
    ("numbers", "low", "high", "max_target"), [(3, 1, 20, 1000), (4, 1, 100, 1000), (2, 5, 9, 50), (6, 1, 10, 100)]
)
def test_rows_are_solvable_and_in_range(numbers: int, low: int, high: int, max_target: int) -> None:
    rows = generate_countdown(500, seed=11, numbers=numbers, low=low, high=high, max_target=max_target)
    assert [row["uid"] for row in rows] == [f"countdown-11-{i}" for i in range(500)]
    for row in rows:
        assert len(row["numbers"]) == numbers
        assert all(type(n) is int and low <= n <= high for n in row["numbers"])
        assert type(row["target"]) is int and 1 <= row["target"] <= max_target
        assert evaluate_countdown(row["solution"], row["numbers"]) == row["target"]
        ground_truth = countdown_ground_truth(row["numbers"], row["target"])
        assert grade(f"\\boxed{{{row['solution']}}}", ground_truth)["score"] == 1.0
        assert parse_countdown_ground_truth(ground_truth) == (row["numbers"], row["target"])


def test_targets_vary() -> None:
    rows = generate_countdown(500, seed=0)
    assert len({row["target"] for row in rows}) > 100
    assert len({tuple(row["numbers"]) for row in rows}) > 400
    assert {op for row in rows for op in re.findall(r"[-+*/]", row["solution"])} == {"+", "-", "*", "/"}


def test_question() -> None:
    assert countdown_question([3, 5, 7], 22) == (
        "Using the numbers 3, 5, 7 exactly once each, with + - * / and parentheses, write an expression equal to 22."
    )


def test_ground_truth_round_trip() -> None:
    assert countdown_ground_truth([3, 5, 7], 22) == "3,5,7=22"
    assert parse_countdown_ground_truth("3,5,7=22") == ([3, 5, 7], 22)


@pytest.mark.parametrize("text", ["", "3,5,7", "3 5 7=22", "3,5,7=twenty-two", "3,5,7=22\n"])
def test_malformed_ground_truth(text: str) -> None:
    with pytest.raises(ValueError, match="malformed countdown ground truth"):
        parse_countdown_ground_truth(text)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"count": -1, "seed": 0},
        {"count": 1, "seed": -1},
        {"count": 1, "seed": 0, "numbers": 1},
        {"count": 1, "seed": 0, "low": 0},
        {"count": 1, "seed": 0, "low": 9, "high": 3},
        {"count": 1, "seed": 0, "max_target": 0},
    ],
)
def test_bad_arguments(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        generate_countdown(**kwargs)


def test_unreachable_bound_raises() -> None:
    with pytest.raises(RuntimeError, match="no countdown target <= 1"):
        generate_countdown(1, seed=0, low=7, high=7, max_target=1)  # 7, 7, 7 reach 2 at the least
