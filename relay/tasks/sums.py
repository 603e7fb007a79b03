"""Two-term sums of whole numbers, read from a question: their terms, whether adding them carries, and the sum
worked column by column as a pupil writes it, optionally after each term's digits placed in their columns.

The bands a race reports by (``benchmarks.learning.sum_bands``) and the worked-sum warm start
(:mod:`relay.sft.worked_sums`) read a question the same way, here.

>>> terms("Calculate 47 + 8."), carries(47, 8)
((47, 8), True)
>>> print(worked_sum(47, 8))
ones: 7 + 8 = 15, write 5 carry 1
tens: 4 + 0 + 1 = 5, write 5
47 + 8 = 55
"""

from __future__ import annotations

from relay.tasks.problem_key import chains

# Column names from the right; a sum with more columns names the rest by their place ("column 5").
COLUMNS = ("ones", "tens", "hundreds", "thousands")


def terms(question: str) -> tuple[int, int] | None:
    """The two terms of the only two-term whole-number sum in ``question``; None if there is not exactly one.

    >>> terms("Calculate 47 + 8."), terms("Calculate 4 + 5 + 6."), terms("What is 3 - 2?")
    ((47, 8), None, None)
    """
    found = chains(question)
    if len(found) != 1 or found[0][1] != ["+"] or not all(t.isdigit() for t in found[0][0]):
        return None
    a, b = found[0][0]
    return int(a), int(b)


def carries(a: int, b: int) -> bool:
    """Whether adding ``a`` and ``b`` column by column carries at least once.

    >>> carries(47, 8), carries(42, 5), carries(50, 60), carries(0, 0)
    (True, False, True, False)
    """
    while a or b:
        if a % 10 + b % 10 >= 10:
            return True
        a, b = a // 10, b // 10
    return False


def column_name(place: int) -> str:
    """The name of the column ``place`` digits from the right (0: the ones).

    >>> column_name(0), column_name(3), column_name(4)
    ('ones', 'thousands', 'column 5')
    """
    return COLUMNS[place] if place < len(COLUMNS) else f"column {place + 1}"


def worked_sum(a: int, b: int) -> str:
    """``a + b`` worked column by column from the ones, one line per column (a missing digit written as 0, the
    carry added where it arrives), then the sum. ValueError on a negative term.

    Worked example: ``66 + 85`` carries twice, and the last carry is a column of its own::

        ones: 6 + 5 = 11, write 1 carry 1
        tens: 6 + 8 + 1 = 15, write 5 carry 1
        hundreds: carry 1, write 1
        66 + 85 = 151
    """
    if a < 0 or b < 0:
        raise ValueError(f"worked_sum({a}, {b}): whole numbers only")
    lines, carry, place = [], 0, 0
    x, y = a, b
    while x or y or place == 0:
        da, db = x % 10, y % 10
        total = da + db + carry
        added = f"{da} + {db}" + (f" + {carry}" if carry else "")
        carry = total // 10
        lines.append(f"{column_name(place)}: {added} = {total}, write {total % 10}" + (" carry 1" if carry else ""))
        x, y, place = x // 10, y // 10, place + 1
    if carry:
        lines.append(f"{column_name(place)}: carry 1, write 1")
    lines.append(f"{a} + {b} = {a + b}")
    return "\n".join(lines)


def placed_digits(a: int, b: int) -> str:
    """Each term's digits named by column, the shorter term's missing columns written as 0: one line per term.

    Why: a model that works a column sum from the question alone takes a one-digit term's digit for a tens digit
    (``8 + 3`` worked as ``tens: 8 + 3 + 1``); naming every digit's column first leaves each column's line to copy
    digits already placed. ValueError on a negative term.

    >>> print(placed_digits(47, 8))
    47: tens 4, ones 7
    8: tens 0, ones 8
    >>> print(placed_digits(9, 5))
    9: ones 9
    5: ones 5
    """
    if a < 0 or b < 0:
        raise ValueError(f"placed_digits({a}, {b}): whole numbers only")
    width = max(len(str(a)), len(str(b)))
    lines = []
    for term in (a, b):
        digits = str(term).zfill(width)
        columns = (f"{column_name(width - 1 - i)} {d}" for i, d in enumerate(digits))
        lines.append(f"{term}: " + ", ".join(columns))
    return "\n".join(lines)


def placed_worked_sum(a: int, b: int) -> str:
    """:func:`placed_digits`, then :func:`worked_sum`.

    >>> print(placed_worked_sum(10, 1))
    10: tens 1, ones 0
    1: tens 0, ones 1
    ones: 0 + 1 = 1, write 1
    tens: 1 + 0 = 1, write 1
    10 + 1 = 11
    """
    return f"{placed_digits(a, b)}\n{worked_sum(a, b)}"
