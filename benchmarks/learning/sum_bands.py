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

from relay.tasks.sums import carries, terms

BANDS = (
    "one-digit",
    "two-digit, no carry",
    "two-digit, carry",
    "mixed length, no carry",
    "mixed length, carry",
    "longer",
    "other",
)
__all__ = ["BANDS", "carries", "largest_term_digits", "sum_band", "terms"]


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
