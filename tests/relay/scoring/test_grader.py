"""Golden-table tests for relay.scoring.grader.grade (math-verify equivalence)."""

from __future__ import annotations

import pytest

from relay.scoring.grade_settings import GradeSettings
from relay.scoring.grader import grade

# (response, ground_truth, expected score with format_score=0)
GOLDEN: list[tuple[str, str, float]] = [
    # #### N
    ("9 * 2 = 18\n#### 18", "18", 1.0),
    ("#### 18.00", "18", 1.0),
    ("#### $18", "18", 1.0),
    ("#### \\$18", "18", 1.0),
    ("#### 18.", "18", 1.0),
    ("#### 18 dollars", "18", 1.0),
    ("#### 1,000", "1000", 1.0),
    ("#### 1000", "1,000", 1.0),
    ("#### 1,450,000", "1450000", 1.0),
    ("#### -3", "-3", 1.0),
    ("#### 3", "-3", 0.0),
    ("#### 0.5", "1/2", 1.0),
    ("#### 1/2", "0.5", 1.0),
    ("#### .5", "0.5", 1.0),
    ("#### 2.50", "2.5", 1.0),
    ("#### 07", "7", 1.0),
    ("#### 17", "18", 0.0),
    ("#### 18.5", "18", 0.0),
    ("#### 18.000001", "18", 0.0),
    ("#### 180", "18", 0.0),
    ("#### 5\n#### 6", "6", 1.0),
    ("#### 5\n#### 6", "5", 0.0),
    ("#### 18 apples and 2 pears", "18", 0.0),
    ("#### 5,6", "5", 0.0),
    # several numbers never count as one of them
    ("#### 5 or 6", "5", 0.0),
    ("#### 5, 6", "6", 0.0),
    ("#### 1 2 3 4 5", "5", 0.0),
    # math-verify evaluates arithmetic and takes the right-hand side of an equation
    ("#### 2 + 3", "5", 1.0),
    ("#### 10 - 2 = 8", "8", 1.0),
    ("#### 10 - 2 = 8", "10", 0.0),
    ("#### x = 12", "12", 1.0),
    ("#### twelve", "12", 0.0),
    ("#### \\frac{3}{4}", "0.75", 1.0),
    ("#### 3:30", "3", 0.0),
    # \boxed{}
    ("so \\boxed{18}", "18", 1.0),
    ("\\boxed{\\frac{1}{2}}", "0.5", 1.0),
    ("\\boxed{\\dfrac{9}{3}}", "3", 1.0),
    ("\\boxed{\\$1,000}", "1000", 1.0),
    ("\\boxed{18\\text{ dollars}}", "18", 1.0),
    ("\\boxed{-4}", "-4", 1.0),
    ("\\boxed{\\sqrt{16}}", "4", 1.0),
    ("\\boxed{2^{3}}", "8", 1.0),
    ("\\boxed{19}", "18", 0.0),
    ("\\boxed{1} then \\boxed{2}", "2", 1.0),
    ("\\boxed{1} then \\boxed{2}", "1", 0.0),
    ("#### 7\nso \\boxed{8}", "7", 1.0),  # #### is preferred
    # the answer is N / answer: N
    ("The answer is 42.", "42", 1.0),
    ("So the answer is $42.", "42", 1.0),
    ("THE ANSWER IS 42", "42", 1.0),
    ("Answer: 42", "42", 1.0),
    ("Final answer: 3/4", "0.75", 1.0),
    ("The answer is 41.", "42", 0.0),
    ("The answer is 3. Wait, the answer is 4.", "4", 1.0),
    ("The answer is forty-two.", "42", 0.0),
    # percent
    ("#### 50%", "50", 1.0),
    ("#### 50\\%", "50", 1.0),
    ("#### 25 %", "25", 1.0),
    ("#### 40%", "50", 0.0),
    ("#### 72\\%", "0.72", 1.0),  # math-verify accepts a percentage as either scale
    ("#### 50", "0.5", 0.0),
    ("The answer is 12%.", "12", 1.0),
    # negatives and decimals
    ("#### -0.25", "-1/4", 1.0),
    ("#### -10", "-10", 1.0),
    ("#### 10", "-10", 0.0),
    ("#### 3.14", "3.14", 1.0),
    ("#### 3.1416", "3.14", 0.0),
    # no extractable answer
    ("She makes 18 dollars.", "18", 0.0),
    ("", "18", 0.0),
    ("I don't know", "18", 0.0),
    ("####", "18", 0.0),
    ("\\boxed{18", "18", 0.0),
    ("The result is 18", "18", 0.0),
    # long realistic responses
    (
        "Janet has 16 eggs. She uses 3 + 4 = 7. So 16 - 7 = 9 eggs. 9 * $2 = $18.\n#### 18",
        "18",
        1.0,
    ),
    (
        "Step 1: 2 * 6 = 12.\nStep 2: 12 + 3 = 15.\nThe answer is 15 cookies.",
        "15",
        1.0,
    ),
]


@pytest.mark.parametrize(("response", "ground_truth", "expected"), GOLDEN)
def test_golden(response: str, ground_truth: str, expected: float) -> None:
    result = grade(response, ground_truth)
    assert result["score"] == expected, result
    assert result["acc"] == expected
    assert set(result) == {"score", "acc", "extracted", "formatted"}
    with_format_score = grade(response, ground_truth, GradeSettings(format_score=0.25))["score"]
    assert with_format_score == (expected or (0.25 if result["formatted"] else 0.0))


def test_golden_table_is_large_enough() -> None:
    assert len(GOLDEN) >= 60
    assert sum(score == 0.0 for *_, score in GOLDEN) >= 15


def test_result_fields() -> None:
    assert grade("#### 1,000.", "1000") == {"score": 1.0, "acc": 1.0, "extracted": "1000", "formatted": True}
    assert grade("no idea", "3") == {"score": 0.0, "acc": 0.0, "extracted": None, "formatted": False}


def test_format_score() -> None:
    settings = GradeSettings(format_score=0.1)
    wrong = grade("#### 17", "18", settings)
    assert wrong == {"score": 0.1, "acc": 0.0, "extracted": "17", "formatted": True}
    assert grade("#### 18", "18", settings)["score"] == 1.0
    assert grade("it is 17", "18", settings)["score"] == 0.0


def test_last_number_fallback() -> None:
    text, fallback = "9 * 2 = 18 dollars", GradeSettings(use_last_number_fallback=True)
    assert grade(text, "18")["extracted"] is None
    found = grade(text, "18", fallback)
    assert found == {"score": 1.0, "acc": 1.0, "extracted": "18", "formatted": False}
    # a fallback answer is not "formatted", so a wrong one earns no format_score
    assert grade("it is 17", "18", GradeSettings(format_score=0.1, use_last_number_fallback=True))["score"] == 0.0
    # the fallback is only used when no formatted answer exists
    assert grade("#### 17 then 18", "18", fallback)["score"] == 0.0


def test_unparseable_ground_truth_raises() -> None:
    with pytest.raises(ValueError, match="ground truth"):
        grade("#### 1", "")
