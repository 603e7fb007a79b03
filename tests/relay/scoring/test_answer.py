"""Tests for final-answer extraction and normalisation."""

from __future__ import annotations

import pytest

from relay.scoring.answer import extract_answer, extract_last_number, normalize_answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("So 9 * 2 = 18.\n#### 18", "18"),
        ("#### 3\nwait, recount\n#### 4", "4"),  # the last marker wins
        ("####72", "72"),
        ("#### $1,000.", "1000"),
        ("#### 18 dollars", "18"),
        ("#### 18. Done!", "18"),
        ("#### \\$5", "5"),
        ("####\n\\boxed{7}", "7"),  # an empty marker falls through
        ("#### 5\n\\boxed{6}", "5"),  # #### is preferred over \boxed
        ("\\boxed{3} then \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\boxed{\\frac{3}{4}", None),  # unbalanced
        ("\\boxed{2} and \\boxed{\\frac{3}{4}", "2"),  # the last balanced one
        ("The answer is 42.", "42"),
        ("the ANSWER IS: -7", "-7"),
        ("Final answer: 0.5", "0.5"),
        ("The answer is 3. But also the answer is 4.\nok", "4"),
        ("The answer is $12.50 per hour.", "12.50"),
        ("I got 42", None),
        ("", None),
    ],
)
def test_extract_answer(text: str, expected: str | None) -> None:
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (" $18$ ", "18"),
        ("1,234,567", "1234567"),
        ("5,6", "5,6"),  # not a thousands separator
        ("12.", "12"),
        ("3.5", "3.5"),
        ("1/2 cup", "1/2"),
        ("50% of them", "50%"),
        ("5 hours and 30 minutes", "5 hours and 30 minutes"),  # two numbers: left alone
    ],
)
def test_normalize_answer(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("She has 3 apples and then 1,200 more.", "1200"),
        ("Cost is $4.50.", "4.50"),
        ("the change is -3 degrees", "-3"),
        ("5-3 = 2", "2"),
        ("10-3", "3"),  # a minus right after a digit is subtraction
        ("only .5 left", ".5"),
        ("no digits", None),
    ],
)
def test_extract_last_number(text: str, expected: str | None) -> None:
    assert extract_last_number(text) == expected


def test_a_copied_placeholder_is_no_answer_in_any_grader() -> None:
    """``\\boxed{<answer>}`` is the prompt's own text: every grader scores it 0, not the format score, and the
    evaluation's format rate does not count it (known-bad: before, each of these scored 0.1)."""
    import doctest

    from relay.scoring import answer
    from relay.scoring.grade_settings import GradeSettings
    from relay.scoring.grader import grade
    from relay.scoring.graders import grade_exact, grade_math

    assert doctest.testmod(answer).failed == 0
    settings = GradeSettings(format_score=0.1)
    for response in ("7 + 8 = \\boxed{<answer>}.", "#### <your answer>", "The answer is <answer>."):
        assert extract_answer(response) is None
        for grader in (grade, grade_math, grade_exact):
            result = grader(response, "15", settings)
            assert (result["score"], result["formatted"]) == (0.0, False), (grader.__name__, response)
    assert extract_answer("\\boxed{15}\nwhere <answer> is the sum") == "15"
    assert grade_exact("\\boxed{x < 3}", "x < 3", settings)["score"] == 1.0
