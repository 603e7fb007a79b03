"""relay.tasks.problem_key: which generated questions are one problem (golden keys)."""

from __future__ import annotations

import pytest

from relay.tasks.problem_key import problem_key


@pytest.mark.parametrize(
    ("question", "key"),
    [
        ("Calculate 74 + 2.", "calculate 2 + 74."),
        ("calculate   2+74.", "calculate 2 + 74."),
        ("Calculate 12 + 3 + 1.", "calculate 1 + 3 + 12."),
        ("Calculate 7 × 3.", "calculate 3 × 7."),
        ("What is 6 * 4?", "what is 4 * 6?"),
        # kept as they are: reordering would change the value, or the chain is not whole numbers
        ("What is 2 - 5 + 3?", "what is 2 - 5 + 3?"),
        ("What is 5 * 3 + 2?", "what is 5 * 3 + 2?"),
        ("Calculate -5 + 3.", "calculate -5 + 3."),
        ("Compute 1.5 + 2.", "compute 1.5 + 2."),
        # a group inside parentheses is a chain of its own
        ("What is 10-(4+3)?", "what is 10-(3 + 4)?"),
        ("Using 3, 5 and 7, make 24.", "using 3, 5 and 7, make 24."),
    ],
)
def test_golden_keys(question: str, key: str) -> None:
    assert problem_key(question) == key


def test_a_sum_and_its_commutative_twin_share_a_key_and_a_difference_does_not() -> None:
    assert problem_key("Calculate 47 + 8.") == problem_key("Calculate 8 + 47.")
    assert problem_key("Calculate 47 - 8.") != problem_key("Calculate 8 - 47.")
