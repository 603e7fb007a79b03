"""Bands of difficulty for two-term sums, to read an accuracy as skill: which sums a model gets right.

A sum ``a + b`` of whole numbers falls in one band by its terms' lengths and whether adding them carries (a column,
units or tens or more, whose digits and incoming carry make 10 or more):

- ``one-digit``: both terms below 10 (``7 + 8`` carries, but both are one digit; that is the band);
- ``two-digit, no carry`` / ``two-digit, carry``: both terms 10..99 (``23 + 45`` / ``47 + 38``, ``50 + 60``);
- ``mixed length, no carry`` / ``mixed length, carry``: one term of each length (``42 + 5`` / ``47 + 8``);
- ``longer``: a term of three digits or more; ``other``: not a two-term sum of whole numbers.

:func:`largest_term_digits` names the harder levels by what they hold (reasoning-gym draws a d-digit term from
0..10^d, so a "2-3 digit" level holds many sums without a three-digit term).

>>> sum_band("Calculate 47 + 8."), sum_band("Calculate 23 + 45."), sum_band("Calculate 3 + 4.")
('mixed length, carry', 'two-digit, no carry', 'one-digit')
"""

from __future__ import annotations

from relay.tasks.problem_key import chains

BANDS = (
    "one-digit",
    "two-digit, no carry",
    "two-digit, carry",
    "mixed length, no carry",
    "mixed length, carry",
    "longer",
    "other",
)


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


def sum_band(question: str) -> str:
    """The band of ``question`` (one of :data:`BANDS`, module docstring)."""
    found = terms(question)
    if found is None:
        return "other"
    a, b = found
    lengths = sorted((len(str(a)), len(str(b))))
    if lengths[1] > 2:
        return "longer"
    if lengths == [1, 1]:
        return "one-digit"
    kind = "two-digit" if lengths == [2, 2] else "mixed length"
    return f"{kind}, {'carry' if carries(a, b) else 'no carry'}"


def largest_term_digits(question: str) -> int | None:
    """The digits of the larger term of a two-term sum (None if ``question`` is not one).

    >>> largest_term_digits("Calculate 104 + 7."), largest_term_digits("Calculate 12 + 99.")
    (3, 2)
    """
    found = terms(question)
    return None if found is None else len(str(max(found)))
