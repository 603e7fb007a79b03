"""Countdown: reach a target from given numbers with ``+ - * /`` and parentheses, each number used exactly once.

Rows are generated, not downloaded. Row ``i`` of ``generate_countdown(count, seed)`` comes from
``numpy.random.default_rng([seed, i])`` alone, so it is the same for every ``count``. Its numbers are drawn
uniformly from ``[low, high]`` (repeats allowed), then combined pairwise in a random order with random
operators until one value is left: that value is the target and the expression is the row's
``"solution"``, so every row is solvable. Every intermediate value is a positive integer (``a - b`` only
when ``a > b``, ``a / b`` only when ``b`` divides ``a``); a row whose target exceeds ``max_target`` is
drawn again from the same generator.

The grader is ``relay.scoring.countdown.grade``; the ground-truth encoding (``"3,5,7=22"``) lives there
and is re-exported here.

Example::

    >>> generate_countdown(1, seed=0)[0]
    {'uid': 'countdown-0-0', 'numbers': [18, 13, 11], 'target': 42, 'solution': '13 + 11 + 18'}
    >>> countdown_question([3, 5, 7], 22)
    'Using the numbers 3, 5, 7 exactly once each, with + - * / and parentheses, write an expression equal to 22.'
    >>> countdown_ground_truth([3, 5, 7], 22)
    '3,5,7=22'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from relay.scoring.countdown import countdown_ground_truth, parse_countdown_ground_truth

__all__ = ["countdown_ground_truth", "countdown_question", "generate_countdown", "parse_countdown_ground_truth"]

MAX_ATTEMPTS = 1000  # draws per row before giving up (the defaults need a handful)
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}
_ATOM = 3  # precedence of a bare number

# (value, text, precedence of the text's outermost operator)
_Node = tuple[int, str, int]


def _combine(left: _Node, op: str, right: _Node) -> _Node:
    """``left op right`` with the fewest parentheses that keep its meaning."""
    (a, a_text, a_prec), (b, b_text, b_prec), prec = left, right, _PRECEDENCE[op]
    if a_prec < prec:
        a_text = f"({a_text})"
    if b_prec < prec or (b_prec == prec and op in "-/"):
        b_text = f"({b_text})"
    value = {"+": a + b, "-": a - b, "*": a * b, "/": a // b}[op]
    return value, f"{a_text} {op} {b_text}", prec


def _random_expression(values: list[int], rng: np.random.Generator) -> tuple[int, str]:
    """Combine all ``values`` in a random binary tree; every intermediate is a positive integer."""
    nodes: list[_Node] = [(v, str(v), _ATOM) for v in values]
    while len(nodes) > 1:
        i, j = (int(k) for k in rng.choice(len(nodes), size=2, replace=False))
        left, right = nodes[i], nodes[j]
        for op in (str(o) for o in rng.permutation(list(_PRECEDENCE))):
            if op in "-/" and left[0] < right[0]:
                left, right = right, left
            if (op == "-" and left[0] == right[0]) or (op == "/" and left[0] % right[0]):
                continue
            break  # "+" and "*" always fit, so some operator does
        nodes = [node for k, node in enumerate(nodes) if k not in (i, j)] + [_combine(left, op, right)]
    return nodes[0][0], nodes[0][1]


def _row(seed: int, index: int, numbers: int, low: int, high: int, max_target: int) -> dict[str, Any]:
    rng = np.random.default_rng([seed, index])
    for _ in range(MAX_ATTEMPTS):
        values = [int(v) for v in rng.integers(low, high, size=numbers, endpoint=True)]
        target, solution = _random_expression(values, rng)
        if target <= max_target:
            return {"uid": f"countdown-{seed}-{index}", "numbers": values, "target": target, "solution": solution}
    raise RuntimeError(f"no countdown target <= {max_target} in {MAX_ATTEMPTS} draws for row {index} of seed {seed}")


def generate_countdown(
    count: int, seed: int, *, numbers: int = 3, low: int = 1, high: int = 20, max_target: int = 1000
) -> list[dict[str, Any]]:
    """``count`` solvable rows ``{"uid", "numbers", "target", "solution"}``, the same for the same seed.

    ``numbers`` values per row, each in ``[low, high]``; ``1 <= target <= max_target``. ``uid`` is
    ``f"countdown-{seed}-{i}"``. Raises ValueError on a negative count or seed, fewer than 2 numbers,
    ``low < 1``, ``low > high`` or ``max_target < 1``.
    """
    if count < 0 or seed < 0:
        raise ValueError(f"count and seed must be non-negative, got count={count}, seed={seed}")
    if numbers < 2 or not 1 <= low <= high or max_target < 1:
        raise ValueError(
            f"need numbers >= 2, 1 <= low <= high, max_target >= 1; got {numbers}, {low}, {high}, {max_target}"
        )
    return [_row(seed, i, numbers, low, high, max_target) for i in range(count)]


def countdown_question(numbers: Sequence[int], target: int) -> str:
    """The question shown to the model (the answer-format instruction is added by the prompt template)."""
    listed = ", ".join(str(int(n)) for n in numbers)
    return (
        f"Using the numbers {listed} exactly once each, with + - * / and parentheses, "
        f"write an expression equal to {int(target)}."
    )
