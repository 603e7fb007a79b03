"""benchmarks.learning.sum_bands: each two-term sum's band and its largest term's length (golden values)."""

from __future__ import annotations

import pytest

from benchmarks.learning.sum_bands import carries, largest_term_digits, sum_band


@pytest.mark.parametrize(
    ("question", "band"),
    [
        ("Calculate 3 + 4.", "one-digit"),
        ("Calculate 7 + 8.", "one-digit"),
        ("Calculate 23 + 45.", "two-digit, no carry"),
        ("Calculate 47 + 38.", "two-digit, carry"),
        ("Calculate 50 + 60.", "two-digit, carry"),
        ("Calculate 42 + 5.", "mixed length, no carry"),
        ("Calculate 8 + 47.", "mixed length, carry"),
        ("Calculate 104 + 7.", "longer"),
        ("Calculate 4 + 5 + 6.", "other"),
        ("Calculate 9 - 3.", "other"),
        ("Calculate -5 + 3.", "other"),
    ],
)
def test_golden_bands(question: str, band: str) -> None:
    assert sum_band(question) == band


def test_carries_in_any_column() -> None:
    assert [carries(a, b) for a, b in [(19, 1), (91, 10), (45, 54), (99, 0)]] == [True, True, False, False]


def test_largest_term_digits() -> None:
    assert [largest_term_digits(q) for q in ["Calculate 5 + 999.", "Calculate 5 + 9.", "What is 2?"]] == [3, 1, None]
