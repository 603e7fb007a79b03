"""Grading one response against a ground truth with math-verify."""

from __future__ import annotations

from typing import Any

from math_verify import LatexExtractionConfig, parse, verify

from relay.scoring.answer import answer_to_grade, extract_answer, normalize_answer
from relay.scoring.grade_settings import DEFAULT_SETTINGS, GradeSettings

# Seconds per math-verify parse/compare. Enforced with signal.alarm, so only in a main thread.
# Lower than math-verify's default 5 s so one pathological item fits inside a pool chunk timeout.
MATH_VERIFY_TIMEOUT_S = 2

_LATEX_ONLY = (LatexExtractionConfig(),)


def _parse_math(answer: str, timeout_s: int | None) -> list[Any]:
    """Parse a bare answer string as inline LaTeX (``$...$``) so numbers, fractions, % all parse."""
    return parse(f"${answer}$", extraction_config=_LATEX_ONLY, parsing_timeout=timeout_s)


def grade(response_text: str, ground_truth: str, settings: GradeSettings = DEFAULT_SETTINGS) -> dict[str, Any]:
    """Score a response: 1.0 if its final answer equals ``ground_truth`` per math-verify.

    Returns ``{"score", "acc", "extracted", "formatted"}``. ``formatted`` is True when
    extract_answer found an answer; a formatted but wrong answer scores ``settings.format_score``.
    With ``settings.use_last_number_fallback`` an unformatted response is graded on its last number
    (correct -> 1.0, wrong -> 0.0). ``settings.math_verify_timeouts=False`` disables math-verify's
    signal.alarm timeouts, which is required off the main thread (the caller must then bound
    the time itself). Raises ValueError if ``ground_truth`` cannot be parsed.
    """
    extracted, formatted = answer_to_grade(
        extract_answer(response_text), response_text, settings.use_last_number_fallback
    )
    if extracted is None:
        return {"score": 0.0, "acc": 0.0, "extracted": None, "formatted": False}

    timeout_s = MATH_VERIFY_TIMEOUT_S if settings.math_verify_timeouts else None
    gold = _parse_math(normalize_answer(ground_truth), timeout_s)
    if not gold:
        raise ValueError(f"math-verify could not parse the ground truth {ground_truth!r}")
    correct = verify(gold, _parse_math(extracted, timeout_s), timeout_seconds=timeout_s)
    score = 1.0 if correct else (settings.format_score if formatted else 0.0)
    return {"score": score, "acc": float(correct), "extracted": extracted, "formatted": formatted}
