"""Golden-table tests for relay.scoring.countdown (Countdown expression grading)."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest

from relay.scoring.countdown import (
    MAX_EXPRESSION_CHARS,
    MAX_LENIENT_CANDIDATES,
    CountdownExpressionError,
    countdown_ground_truth,
    evaluate_countdown,
    grade,
    lenient_correct,
    normalize_expression,
    parse_countdown_ground_truth,
)
from relay.scoring.grade_settings import GradeSettings

GT = "2,3,5,7=22"  # (7 - 3) * 5 + 2

# (response, ground truth, expected acc, expected formatted, expected extracted)
GOLDEN: list[tuple[str, str, float, bool, str | None]] = [
    # correct
    ("So \\boxed{(7 - 3) * 5 + 2}", GT, 1.0, True, "(7 - 3) * 5 + 2"),
    ("\\boxed{2+5*(7-3)}", GT, 1.0, True, "2+5*(7-3)"),
    ("\\boxed{(7 - 3)*5 + 2 = 22}", GT, 1.0, True, "(7 - 3)*5 + 2"),  # "= target" suffix dropped
    ("\\boxed{(7 - 3)*5 + 2 = 23}", GT, 1.0, True, "(7 - 3)*5 + 2"),  # the suffix is not checked
    ("$\\boxed{\\left(7 - 3\\right) \\times 5 + 2}$", GT, 1.0, True, "(7 - 3) * 5 + 2"),
    ("\\boxed{(7 − 3) × 5 + 2}", GT, 1.0, True, "(7 - 3) * 5 + 2"),  # unicode minus and times
    ("\\boxed{(7 - 3) \\cdot 5 + 2}", GT, 1.0, True, "(7 - 3) * 5 + 2"),
    ("\\boxed{[7 - 3] * 5 + 2}", GT, 1.0, True, "(7 - 3) * 5 + 2"),
    ("\\boxed{{(7 - 3) * 5} + 2}", GT, 1.0, True, "((7 - 3) * 5) + 2"),  # nested braces group
    ("\\boxed{1} then \\boxed{(7-3)*5+2}", GT, 1.0, True, "(7-3)*5+2"),  # the last box counts
    ("\\boxed{\\frac{7 \\times 6}{2} + 1}", "1,2,6,7=22", 1.0, True, "((7 * 6)/(2)) + 1"),
    ("\\boxed{\\dfrac{\\frac{7}{2} \\times 6}{1} + 1}", "1,1,2,6,7=22", 1.0, True, "((((7)/(2)) * 6)/(1)) + 1"),
    ("\\boxed{\\dfrac{\\frac{8}{2} \\times 6}{1} - 2}", "1,2,2,6,8=22", 1.0, True, "((((8)/(2)) * 6)/(1)) - 2"),
    ("\\boxed{7 / 2 * 4}", "2,4,7=14", 1.0, True, "7 / 2 * 4"),  # exact fractions in between
    ("\\boxed{7 \\div 2 \\times 4}", "2,4,7=14", 1.0, True, "7 / 2 * 4"),
    ("\\boxed{(1/3 + 1/3 + 1/3) * 5}", "1,1,1,3,3,3,5=5", 1.0, True, "(1/3 + 1/3 + 1/3) * 5"),
    ("\\boxed{5 + 5 - 3}", "3,5,5=7", 1.0, True, "5 + 5 - 3"),  # repeated numbers
    # wrong value
    ("\\boxed{7 * 5 - 3 + 2}", GT, 0.0, True, "7 * 5 - 3 + 2"),
    ("\\boxed{7 - 3 * 5 + 2}", GT, 0.0, True, "7 - 3 * 5 + 2"),  # precedence is respected
    ("\\boxed{{7 - 3} \\times 5 + 2 + 0}", GT, 0.0, True, "(7 - 3) * 5 + 2 + 0"),  # 0 is not given
    # numbers reused, missing, extra
    ("\\boxed{(7 - 3) * 5 + 2 + 5 - 5}", GT, 0.0, True, "(7 - 3) * 5 + 2 + 5 - 5"),
    ("\\boxed{7 * 3 + 1}", "1,3,7,9=22", 0.0, True, "7 * 3 + 1"),
    ("\\boxed{5 + 5 - 3}", "3,5=7", 0.0, True, "5 + 5 - 3"),
    ("\\boxed{22}", GT, 0.0, True, "22"),
    ("\\boxed{72 * 0 + 35 - 13}", GT, 0.0, True, "72 * 0 + 35 - 13"),
    # disallowed syntax
    ("\\boxed{__import__('os').system('true')}", GT, 0.0, True, "__import__('os').system('true')"),
    ("\\boxed{2**10}", "2,10=1024", 0.0, True, "2**10"),
    ("\\boxed{7 // 2}", "2,7=3", 0.0, True, "7 // 2"),
    ("\\boxed{x + 22}", GT, 0.0, True, "x + 22"),
    ("\\boxed{-2 + 9}", "2,9=7", 0.0, True, "-2 + 9"),  # no unary minus
    ("\\boxed{+9 - 2}", "2,9=7", 0.0, True, "+9 - 2"),
    ("\\boxed{2.0 * 3.5}", "2,3=7", 0.0, True, "2.0 * 3.5"),
    ("\\boxed{2(3 + 1)}", "1,2,3=8", 0.0, True, "2(3 + 1)"),  # implicit product
    ("\\boxed{(2)(4)}", "2,4=8", 0.0, True, "(2)(4)"),
    ("\\boxed{0x10 + 1}", "1,16=17", 0.0, True, "0x10 + 1"),
    ("\\boxed{1_6 + 1}", "1,16=17", 0.0, True, "1_6 + 1"),
    ("\\boxed{7 - 3) * 5 + 2}", GT, 0.0, True, "7 - 3) * 5 + 2"),  # not an expression
    ("\\boxed{\\frac{7}2}", "2,7=7", 0.0, True, "\\frac{7}2"),
    ("\\boxed{\\sqrt{4} + 5}", "4,5=7", 0.0, True, "\\sqrt(4) + 5"),
    ("\\boxed{\\text{(7-3)*5+2}}", GT, 0.0, True, "\\text((7-3)*5+2)"),
    # division by zero
    ("\\boxed{7 / (3 - 3) + 22}", "3,3,7,22=22", 0.0, True, "7 / (3 - 3) + 22"),
    # no box, empty box, unbalanced box
    ("(7 - 3) * 5 + 2 = 22", GT, 0.0, False, None),
    ("The answer is (7 - 3) * 5 + 2", GT, 0.0, False, None),
    ("\\boxed{ }", GT, 0.0, False, None),
    ("\\boxed{(7 - 3) * 5 + 2", GT, 0.0, False, None),
    ("", GT, 0.0, False, None),
]


@pytest.mark.parametrize(("response", "ground_truth", "acc", "formatted", "extracted"), GOLDEN)
def test_grade_golden(response: str, ground_truth: str, acc: float, formatted: bool, extracted: str | None) -> None:
    result = grade(response, ground_truth)
    assert result == {"score": acc, "acc": acc, "extracted": extracted, "formatted": formatted}


@pytest.mark.parametrize(
    ("response", "score"),
    [
        ("\\boxed{(7 - 3) * 5 + 2}", 1.0),
        ("\\boxed{7 * 5 - 3 + 2}", 0.1),  # formatted, wrong value
        ("\\boxed{__import__('os')}", 0.1),  # formatted, disallowed
        ("\\boxed{7 / (3 - 3)}", 0.1),  # formatted, division by zero
        ("(7 - 3) * 5 + 2", 0.0),  # unformatted
    ],
)
def test_format_score(response: str, score: float) -> None:
    assert grade(response, GT, GradeSettings(format_score=0.1))["score"] == score


def test_fallback_and_timeout_settings_are_ignored() -> None:
    settings = GradeSettings(use_last_number_fallback=True, math_verify_timeouts=False)
    assert grade("(7 - 3) * 5 + 2 = 22", GT, settings)["formatted"] is False
    assert grade("\\boxed{(7-3)*5+2}", GT, settings)["acc"] == 1.0


def test_too_long_expression_is_wrong_and_truncated() -> None:
    body = "+".join(["1"] * 150)  # 299 characters
    result = grade(f"\\boxed{{{body}}}", countdown_ground_truth([1] * 150, 150))
    assert result == {"score": 0.0, "acc": 0.0, "extracted": body[:MAX_EXPRESSION_CHARS], "formatted": True}
    short = "+".join(["1"] * 100)  # 199 characters: within the cap
    assert grade(f"\\boxed{{{short}}}", countdown_ground_truth([1] * 100, 100))["acc"] == 1.0


@pytest.mark.parametrize(
    "body",
    [
        "(" * 99 + "1" + ")" * 99,  # deep nesting within the length cap
        "9" * 199,  # a huge literal that is not a given number
        "99999999*99999999*99999999",  # huge product of given numbers
        "1/" * 99 + "1",
        "\\frac{" * 30 + "}" * 30,
    ],
)
def test_pathological_expressions_are_wrong_and_fast(body: str) -> None:
    numbers = [99999999] * 3 if "*" in body else [1]
    start = time.perf_counter()
    result = grade(f"\\boxed{{{body}}}", countdown_ground_truth(numbers, 0))  # no body reaches 0
    assert time.perf_counter() - start < 0.5
    assert result["acc"] == 0.0
    assert result["formatted"] is True


def test_magnitude_cap() -> None:
    with pytest.raises(CountdownExpressionError, match="too large"):
        evaluate_countdown("99999999*99999999", [99999999, 99999999])
    assert evaluate_countdown("999999*999999", [999999, 999999]) == 999998000001


@pytest.mark.parametrize(
    ("expression", "numbers", "message"),
    [
        ("7 / (3 - 3)", [3, 3, 7], "division by zero"),
        ("2 ** 3", [2, 3], "Pow is not allowed"),
        ("-2 + 3", [2, 3], "USub is not allowed"),
        ("2 + 2", [2], "exactly once"),
        ("abs(2)", [2], "only integers"),
        ("(2", [2], "not an expression"),
    ],
)
def test_evaluate_errors(expression: str, numbers: list[int], message: str) -> None:
    with pytest.raises(CountdownExpressionError, match=message):
        evaluate_countdown(expression, numbers)


def test_evaluate_is_exact() -> None:
    assert evaluate_countdown("(1 / 3) * 3", [1, 3, 3]) == 1
    assert evaluate_countdown("7 / 2", [2, 7]) == Fraction(7, 2)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\frac{20}{4} \\times 3 = 15", "((20)/(4)) * 3"),
        ("\\left( 7 - 3 \\right)\\cdot 5", "( 7 - 3 )* 5"),
        ("7\\,\\div\\, 2", "7 / 2"),
        ("$7 ÷ 2$", "7 / 2"),
        ("\\tfrac {1} {2}", "((1)/(2))"),
    ],
)
def test_normalize_expression(text: str, expected: str) -> None:
    assert normalize_expression(text) == expected


@pytest.mark.parametrize(
    ("numbers", "target", "text"),
    [([3, 5, 7], 22, "3,5,7=22"), ([10, 10], 1, "10,10=1"), ([4], -4, "4=-4"), ((0, 12), 0, "0,12=0")],
)
def test_ground_truth_round_trip(numbers: list[int], target: int, text: str) -> None:
    assert countdown_ground_truth(numbers, target) == text
    assert parse_countdown_ground_truth(text) == (list(numbers), target)


@pytest.mark.parametrize("text", ["", "22", "3,5,7", "3,5,7=", "=22", "3, 5, 7=22", "3,5,,7=22", "3,-5=2", "3,5=2.0"])
def test_malformed_ground_truth(text: str) -> None:
    with pytest.raises(ValueError, match="malformed countdown ground truth"):
        parse_countdown_ground_truth(text)
    with pytest.raises(ValueError, match="malformed countdown ground truth"):
        grade("\\boxed{3+5}", text)


@pytest.mark.parametrize(("numbers", "target"), [([], 3), ([3, -1], 2), ([2.5], 2)])
def test_ground_truth_rejects_bad_numbers(numbers: list, target: int) -> None:
    with pytest.raises((ValueError, TypeError)):
        countdown_ground_truth(numbers, target)


# (response, ground truth, lenient): Countdown's lenient reading finds an expression of the numbers reaching the
# target anywhere in the response, under the boxed expression's rules.
LENIENT_GOLDEN = [
    ("(7 - 3) * 5 + 2 = 22, so \\boxed{22}", "3,5,7,2=22", True),  # strictly wrong: the box holds no expression
    ("We get \\((7 - 3) \\times 5 + 2\\)", "3,5,7,2=22", True),  # LaTeX operators and math delimiters
    ("\\[ \\frac{14}{7} + 20 \\]", "14,7,20=22", True),
    ("7 + 3 + 5 + 2 = 17", "3,5,7,2=22", False),  # reaches another number
    ("the sum is 9 + 7 + 6 = 21", "9,7,6=22", True),  # the expression is the answer (as in a box), not its stated value
    ("Step 1: 7-3=4. Step 2: 4*5=20. 20+2=22", "3,5,7,2=22", False),  # steps, no one expression of all four
    ("(7 - 3) * 5 + 2 + 2 = 24", "3,5,7,2=24", False),  # a number used twice
    ("22", "3,5,7,2=22", False),
    ("4", "4=4", True),  # one number is an expression of itself
    ("", "3,5,7,2=22", False),
]


@pytest.mark.parametrize(("response", "truth", "lenient"), LENIENT_GOLDEN)
def test_lenient_correct_golden(response: str, truth: str, lenient: bool) -> None:
    assert lenient_correct(response, truth) is lenient


def test_lenient_reads_only_the_last_candidates() -> None:
    right = "(7 - 3) * 5 + 2"
    early = right + " = 22\n" + "1 + 1 = 2\n" * MAX_LENIENT_CANDIDATES
    assert lenient_correct(right + " = 22", "3,5,7,2=22")
    assert not lenient_correct(early, "3,5,7,2=22")  # pushed out by 64 later stretches
