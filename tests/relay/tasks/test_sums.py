"""relay.tasks.sums: a question's two-term sum and the sum worked column by column, against sums worked by hand."""

from __future__ import annotations

import doctest

import pytest

from relay.tasks import sums
from relay.tasks.sums import carries, placed_digits, placed_worked_sum, terms, worked_sum


def test_the_module_examples_hold() -> None:
    result = doctest.testmod(sums)
    assert result.attempted >= 8 and result.failed == 0


@pytest.mark.parametrize(
    ("a", "b", "worked"),
    [
        (3, 4, "ones: 3 + 4 = 7, write 7\n3 + 4 = 7"),
        (0, 0, "ones: 0 + 0 = 0, write 0\n0 + 0 = 0"),
        (7, 8, "ones: 7 + 8 = 15, write 5 carry 1\ntens: carry 1, write 1\n7 + 8 = 15"),
        (23, 45, "ones: 3 + 5 = 8, write 8\ntens: 2 + 4 = 6, write 6\n23 + 45 = 68"),
        (
            66,
            85,
            "ones: 6 + 5 = 11, write 1 carry 1\ntens: 6 + 8 + 1 = 15, write 5 carry 1\nhundreds: carry 1, write 1\n"
            "66 + 85 = 151",
        ),
        (5, 100, "ones: 5 + 0 = 5, write 5\ntens: 0 + 0 = 0, write 0\nhundreds: 0 + 1 = 1, write 1\n5 + 100 = 105"),
        (
            9999,
            1,
            "ones: 9 + 1 = 10, write 0 carry 1\ntens: 9 + 0 + 1 = 10, write 0 carry 1\n"
            "hundreds: 9 + 0 + 1 = 10, write 0 carry 1\nthousands: 9 + 0 + 1 = 10, write 0 carry 1\n"
            "column 5: carry 1, write 1\n9999 + 1 = 10000",
        ),
    ],
)
def test_a_worked_sum_is_the_pupils_column_addition(a: int, b: int, worked: str) -> None:
    assert worked_sum(a, b) == worked


def test_every_worked_sum_writes_its_sum_digit_by_digit() -> None:
    for a in range(0, 120, 7):
        for b in range(0, 1200, 13):
            lines = worked_sum(a, b).splitlines()
            written = "".join(line.split("write ")[1][0] for line in reversed(lines[:-1]))
            assert int(written) == a + b and lines[-1] == f"{a} + {b} = {a + b}"
            assert ("carry 1" in worked_sum(a, b)) == carries(a, b)


def test_only_a_two_term_sum_of_whole_numbers_is_read_and_worked() -> None:
    assert terms("Calculate 8+47.") == (8, 47)
    assert [terms(q) for q in ("Calculate 4.5 + 1.", "What is 3 * 4?", "Calculate -3 + 4.", "Hi")] == [None] * 4
    with pytest.raises(ValueError, match="whole numbers only"):
        worked_sum(-3, 4)
    with pytest.raises(ValueError, match="whole numbers only"):
        placed_digits(3, -4)


@pytest.mark.parametrize(
    ("a", "b", "placed"),
    [
        (0, 7, "0: ones 0\n7: ones 7"),
        (8, 3, "8: ones 8\n3: ones 3"),
        (8, 60, "8: tens 0, ones 8\n60: tens 6, ones 0"),
        (1, 100, "1: hundreds 0, tens 0, ones 1\n100: hundreds 1, tens 0, ones 0"),
        (
            12345,
            6,
            "12345: column 5 1, thousands 2, hundreds 3, tens 4, ones 5\n"
            "6: column 5 0, thousands 0, hundreds 0, tens 0, ones 6",
        ),
    ],
)
def test_placed_digits_name_every_digits_column_by_hand(a: int, b: int, placed: str) -> None:
    assert placed_digits(a, b) == placed
    assert placed_worked_sum(a, b) == f"{placed}\n{worked_sum(a, b)}"


def test_each_columns_line_adds_the_digits_placed_in_that_column() -> None:
    for a in range(0, 120, 7):
        for b in range(0, 1200, 13):
            lines = placed_worked_sum(a, b).splitlines()
            placed = [dict(c.rsplit(" ", 1) for c in line.split(": ", 1)[1].split(", ")) for line in lines[:2]]
            for line in lines[2:-1]:
                column, work = line.split(": ", 1)
                if not work.startswith("carry"):
                    assert work.split(" = ")[0].split(" + ")[:2] == [placed[0][column], placed[1][column]]
