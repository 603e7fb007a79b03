"""A user's per-response grader: ``reward.grader: package.module:callable``, run like the shipped graders.

Signature::

    def my_grader(response_text: str, ground_truth: str, **grader_options) -> float | dict

Return the score, or a dict with ``"score"`` and optionally ``"acc"`` (default: the score), ``"extracted"`` and
``"formatted"``. It runs in the reward role's grader processes, one response at a time under
``reward.item_timeout_s`` (a response it hangs on scores 0 and counts in ``reward/timeouts``; one it raises on
scores 0 and counts in ``reward/errors``), and it is the grader of ``data.task``'s rows only: the rows of other
tasks in a mixed dataset keep their own graders. ``reward.mode=function`` (:mod:`relay.scoring.user_function`)
is the other way in: one call over the whole batch, with the tokens.

Example (``my_graders.py`` on the Python path, ``reward.grader: my_graders:starts_with``)::

    def starts_with(response_text, ground_truth, prefix="Answer:"):
        return float(response_text.strip().startswith(f"{prefix} {ground_truth}"))
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

from relay.scoring.user_function import import_callable


def is_user_grader(name: str) -> bool:
    """Whether ``name`` is a ``package.module:callable`` spec rather than a shipped grader's name."""
    return ":" in name


@functools.cache
def load_user_grader(spec: str) -> Callable[..., Any]:
    """The callable ``spec`` names (imported once per process); ValueError naming ``reward.grader`` otherwise."""
    return import_callable(spec, "reward.grader")


def grade_with_user_grader(
    spec: str, response_text: str, ground_truth: str, options: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The user grader's result as the shipped graders give theirs (``score``, ``acc``, ``extracted``,
    ``formatted``). The user's function gets ``options`` as keyword arguments and nothing of the shipped graders'
    :class:`~relay.scoring.grade_settings.GradeSettings` (format score, last-number fallback): it decides its own
    partial credit. ValueError for a result that is not a finite number or a dict with one under ``score``.

    Worked example: a grader returning ``0.5`` gives ``{"score": 0.5, "acc": 0.5, "extracted": None, "formatted":
    True}``; one returning ``{"score": 1, "acc": 0}`` gives score 1.0 and acc 0.0.
    """
    result = load_user_grader(spec)(response_text, ground_truth, **dict(options or {}))
    if isinstance(result, dict):
        if "score" not in result:
            raise ValueError(f"reward.grader={spec!r} returned a dict without 'score': {result}")
        score, acc = _finite(spec, result["score"]), _finite(spec, result.get("acc", result["score"]))
        extracted, formatted = result.get("extracted"), bool(result.get("formatted", True))
    else:
        score = acc = _finite(spec, result)
        extracted, formatted = None, True
    return {"score": score, "acc": acc, "extracted": extracted, "formatted": formatted}


def _finite(spec: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"reward.grader={spec!r} returned {value!r}, not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"reward.grader={spec!r} returned {number}, not a finite number")
    return number
