"""The settings every shipped grader shares (:class:`GradeSettings`), apart from each grader's own options.

This module imports nothing heavy, so a caller can build settings without loading math-verify.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GradeSettings:
    """How a grader turns a response's answer into a score, the same for every shipped grader.

    Fields:

    - ``format_score``: the score of a response whose answer is where the prompt asks for it (``#### X``,
      ``\\boxed{X}``, ...) but wrong (``reward.format_score``). A right answer scores 1.0 and a response without
      such an answer 0.0.
    - ``use_last_number_fallback``: grade a response without such an answer on its last number
      (``reward.use_last_number_fallback``); that answer counts as unformatted, so a wrong one scores 0.0, never
      ``format_score``.
    - ``math_verify_timeouts``: let math-verify bound each parse and compare with its ``signal.alarm`` timeouts
      (``gsm8k`` and ``math``; the other graders ignore it). Those work only in a main thread: pass False off it,
      or when the caller times each item itself (:mod:`relay.scoring.pool` does both).

    A grader's own options (``pattern``, ``case_sensitive``, ``partial_credit``) stay its own keyword arguments.

    Worked example: with ``GradeSettings(format_score=0.1)``, ``"#### 17"`` against ``18`` scores 0.1,
    ``"#### 18"`` scores 1.0 and ``"it is 17"`` scores 0.0; adding ``use_last_number_fallback=True`` makes
    ``"it is 18"`` score 1.0 and ``"it is 17"`` still 0.0. ``dataclasses.replace`` derives a variant:

    >>> from dataclasses import replace
    >>> settings = GradeSettings(format_score=0.1)
    >>> replace(settings, math_verify_timeouts=False)
    GradeSettings(format_score=0.1, use_last_number_fallback=False, math_verify_timeouts=False)
    """

    format_score: float = 0.0
    use_last_number_fallback: bool = False
    math_verify_timeouts: bool = True


# The settings a grader uses when none are given.
DEFAULT_SETTINGS = GradeSettings()
