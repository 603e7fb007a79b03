"""Golden-table tests for relay.scoring.graders: the math, exact and regex graders, math-verify's time limit (in both
graders that call it), dispatch and config checks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from relay.scoring.grade_settings import GradeSettings
from relay.scoring.grader import MATH_VERIFY_TIMEOUT_S, grade
from relay.scoring.graders import (
    GRADER_OPTIONS,
    GRADERS,
    check_grader,
    grade_exact,
    grade_item,
    grade_math,
    grade_regex,
    lenient_acc,
    normalize_text,
)

# A formatted but wrong answer scores 0.1; an unformatted response is graded on its last number.
WITH_FORMAT_SCORE = GradeSettings(format_score=0.1)
WITH_FALLBACK = GradeSettings(use_last_number_fallback=True)

# (response, ground_truth, expected score with format_score=0); each value was checked against math-verify 0.9.0
MATH_GOLDEN: list[tuple[str, str, float]] = [
    # fractions and decimals
    ("so \\boxed{\\frac{1}{2}}", "0.5", 1.0),
    ("\\boxed{\\frac{1}{2}}", "\\frac{2}{4}", 1.0),
    ("\\boxed{\\frac12}", "0.5", 1.0),
    ("\\boxed{\\dfrac{9}{3}}", "3", 1.0),
    ("\\boxed{-\\frac{1}{2}}", "-0.5", 1.0),
    ("\\boxed{\\frac{1}{3}}", "0.5", 0.0),
    ("\\boxed{2}", "-2", 0.0),
    # radicals, nested braces
    ("\\boxed{2\\sqrt{3}}", "\\sqrt{12}", 1.0),
    ("\\boxed{\\frac{\\sqrt{2}}{2}}", "\\frac{1}{\\sqrt{2}}", 1.0),
    ("\\boxed{\\frac{\\sqrt{2}}{2}}", "\\frac{\\sqrt{3}}{2}", 0.0),
    ("\\boxed{\\sqrt{2}}", "1.41421356", 1.0),  # floats compare to 6 decimal places
    ("\\boxed{\\sqrt{2}}", "1.414", 0.0),
    ("\\boxed{\\pi}", "\\pi", 1.0),
    ("\\boxed{3.14}", "\\pi", 0.0),
    # intervals, tuples, sets
    ("\\boxed{(1, 2)}", "(1,2)", 1.0),
    ("\\boxed{[1, 2)}", "[1,2)", 1.0),
    ("\\boxed{(1, 2]}", "[1,2)", 0.0),
    ("\\boxed{(-\\infty, 3]}", "(-\\infty,3]", 1.0),
    ("\\boxed{(2, 1)}", "(1,2)", 0.0),
    ("\\boxed{(1,2,3)}", "(1, 2, 3)", 1.0),
    ("\\boxed{(3,2,1)}", "(1, 2, 3)", 0.0),  # a tuple is ordered
    ("\\boxed{\\{2,1\\}}", "\\{1,2\\}", 1.0),  # a set is not
    ("\\boxed{\\{1,3\\}}", "\\{1,2\\}", 0.0),
    ("\\boxed{1, 2}", "2, 1", 1.0),  # a bare list of answers compares as a set
    # expressions and equations
    ("\\boxed{x^2+1}", "1+x^2", 1.0),
    ("\\boxed{x^2-1}", "x^2+1", 0.0),
    ("\\boxed{2x}", "x\\cdot 2", 1.0),
    ("\\boxed{x = 3}", "3", 1.0),
    ("\\boxed{\\sin(\\pi/6)}", "\\frac12", 1.0),
    ("\\boxed{\\log_2 8}", "3", 1.0),
    ("\\boxed{\\binom{5}{2}}", "10", 1.0),
    ("\\boxed{\\begin{pmatrix}1\\\\2\\end{pmatrix}}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", 1.0),
    # percent: math-verify accepts either scale
    ("\\boxed{50\\%}", "50\\%", 1.0),
    ("\\boxed{0.5}", "50\\%", 1.0),
    ("\\boxed{50}", "50\\%", 1.0),
    # units, money, text, choices
    ("\\boxed{\\$1,000}", "1000", 1.0),
    ("\\boxed{18\\text{ dollars}}", "18", 1.0),
    ("\\boxed{\\text{(B)}}", "B", 1.0),
    ("\\boxed{\\text{(B)}}", "C", 0.0),
    # which box; a boxed ground truth
    ("\\boxed{1} then \\boxed{2}", "2", 1.0),
    ("\\boxed{1} then \\boxed{2}", "1", 0.0),
    ("\\boxed{3}", "\\boxed{3}", 1.0),
    ("\\boxed{3}", "The answer is $\\boxed{3}$.", 1.0),
    # no boxed answer: unformatted
    ("the answer is 1/2", "0.5", 0.0),
    ("#### 3", "3", 0.0),
    ("\\boxed{}", "1", 0.0),
    ("\\boxed{ }", "1", 0.0),
    ("\\boxed{\\frac{1}{2}", "0.5", 0.0),  # unbalanced braces
    ("", "1", 0.0),
]


@pytest.mark.parametrize(("response", "ground_truth", "expected"), MATH_GOLDEN)
def test_math_golden(response: str, ground_truth: str, expected: float) -> None:
    result = grade_math(response, ground_truth)
    assert result["score"] == expected, result
    assert result["acc"] == expected
    assert set(result) == {"score", "acc", "extracted", "formatted"}
    assert result["formatted"] == (result["extracted"] is not None)
    with_format_score = grade_math(response, ground_truth, GradeSettings(format_score=0.25))["score"]
    assert with_format_score == (expected or (0.25 if result["formatted"] else 0.0))


def test_math_result_fields_and_format_score() -> None:
    nested = grade_math("so \\boxed{\\frac{\\sqrt{2}}{2}}.", "\\frac{\\sqrt{2}}{2}")
    assert nested == {"score": 1.0, "acc": 1.0, "extracted": "\\frac{\\sqrt{2}}{2}", "formatted": True}
    wrong = grade_math("\\boxed{3}", "\\frac12", WITH_FORMAT_SCORE)
    assert wrong == {"score": 0.1, "acc": 0.0, "extracted": "3", "formatted": True}
    assert grade_math("it is 3", "\\frac12", WITH_FORMAT_SCORE)["score"] == 0.0


def test_math_last_number_fallback() -> None:
    text = "so it is 0.5 I think"
    assert grade_math(text, "\\frac12") == {"score": 0.0, "acc": 0.0, "extracted": None, "formatted": False}
    assert grade_math(text, "\\frac12", WITH_FALLBACK) == {
        "score": 1.0,
        "acc": 1.0,
        "extracted": "0.5",
        "formatted": False,
    }
    # an unformatted fallback answer earns no format_score, and a boxed answer wins over the last number
    assert (
        grade_math("it is 0.4", "0.5", GradeSettings(format_score=0.1, use_last_number_fallback=True))["score"] == 0.0
    )
    assert grade_math("\\boxed{4} not 5", "5", WITH_FALLBACK)["score"] == 0.0


@pytest.mark.parametrize("ground_truth", ["", "   ", "\\boxed{}"])
def test_math_unparseable_ground_truth_raises(ground_truth: str) -> None:
    with pytest.raises(ValueError, match="ground truth"):
        grade_math("\\boxed{1}", ground_truth)


# The graders that call math-verify, each with a response putting an answer where it looks for one.
MATH_VERIFY_GRADERS = [(grade, "#### {}"), (grade_math, "\\boxed{{{}}}")]


@pytest.mark.parametrize(("grader", "response"), MATH_VERIFY_GRADERS)
def test_math_verify_alarm_bounds_a_pathological_answer(grader: Callable[..., dict], response: str) -> None:
    start = time.perf_counter()
    result = grader(response.format("9^{9^{9}}"), "72")  # sympy would need a 370-million-digit power
    assert result["score"] == 0.0 and result["formatted"]
    assert time.perf_counter() - start < 3 * MATH_VERIFY_TIMEOUT_S + 2


@pytest.mark.parametrize(("grader", "response"), MATH_VERIFY_GRADERS)
def test_math_off_the_main_thread_needs_timeouts_disabled(grader: Callable[..., dict], response: str) -> None:
    results: dict[bool, Any] = {}

    def run(timeouts: bool) -> None:
        try:
            results[timeouts] = grader(response.format("0.5"), "1/2", GradeSettings(math_verify_timeouts=timeouts))
        except ValueError as e:
            results[timeouts] = e

    for timeouts in (True, False):
        thread = threading.Thread(target=run, args=(timeouts,))
        thread.start()
        thread.join()
    assert results[False]["score"] == 1.0
    assert isinstance(results[True], ValueError)  # signal.alarm only works in the main thread


# (response, ground_truth, expected score, expected score with case_sensitive=True)
EXACT_GOLDEN: list[tuple[str, str, float, float]] = [
    ("#### Paris", "Paris", 1.0, 1.0),
    ("#### Paris", "paris", 1.0, 0.0),
    ("#### PARIS.", "Paris", 1.0, 0.0),  # a trailing period goes
    ("#### Paris.", "Paris", 1.0, 1.0),
    ("The answer is  New   York.", "new york", 1.0, 0.0),  # whitespace collapses
    ("#### new york", "  New\tYork  ", 1.0, 0.0),
    ("\\boxed{Blue Whale}", "blue whale", 1.0, 0.0),
    ("Answer: True", "True", 1.0, 1.0),
    ("#### a.", "a..", 0.0, 0.0),  # only one period goes
    ("#### yes!", "yes", 0.0, 0.0),
    # no numeric, currency or unit normalisation
    ("#### 18.0", "18", 0.0, 0.0),
    ("#### 18 dollars", "18", 0.0, 0.0),
    ("#### $18", "18", 0.0, 0.0),
    # the rules and their order are extract_answer's: #### first, each rule's last occurrence
    ("#### paris\n#### rome", "rome", 1.0, 1.0),
    ("#### rome\n\\boxed{paris}", "rome", 1.0, 1.0),
    ("#### \n\\boxed{ok}", "ok", 1.0, 1.0),  # an empty answer falls through to the next rule
    ("The answer is St. Louis.", "St. Louis", 0.0, 0.0),  # "the answer is X" ends at a sentence end
    # unformatted
    ("paris", "paris", 0.0, 0.0),
    ("", "paris", 0.0, 0.0),
]


@pytest.mark.parametrize(("response", "ground_truth", "expected", "expected_case_sensitive"), EXACT_GOLDEN)
def test_exact_golden(response: str, ground_truth: str, expected: float, expected_case_sensitive: float) -> None:
    result = grade_exact(response, ground_truth)
    assert result["score"] == result["acc"] == expected, result
    assert grade_exact(response, ground_truth, case_sensitive=True)["score"] == expected_case_sensitive
    with_format_score = grade_exact(response, ground_truth, GradeSettings(format_score=0.25))["score"]
    assert with_format_score == (expected or (0.25 if result["formatted"] else 0.0))


def test_exact_result_fields_and_fallback() -> None:
    assert grade_exact("#### Paris. ", "paris") == {"score": 1.0, "acc": 1.0, "extracted": "Paris.", "formatted": True}
    assert grade_exact("it is 7", "7") == {"score": 0.0, "acc": 0.0, "extracted": None, "formatted": False}
    assert grade_exact("it is 7", "7", WITH_FALLBACK) == {
        "score": 1.0,
        "acc": 1.0,
        "extracted": "7",
        "formatted": False,
    }


def test_normalize_text() -> None:
    assert normalize_text("  New   York City. ") == "new york city"
    assert normalize_text("  New   York City. ", case_sensitive=True) == "New York City"
    assert normalize_text("Straße") == normalize_text("STRASSE")  # casefold, not lower
    assert normalize_text("a .") == "a"


CHOICE = r"Choice:\s*\(?([A-E])"
# (response, ground_truth, pattern, expected score, expected extracted)
REGEX_GOLDEN: list[tuple[str, str, str, float, str | None]] = [
    ("Choice: (b) ... Choice: C", "c", CHOICE, 1.0, "C"),  # the last match, group 1
    ("Choice: (b) ... Choice: C", "b", CHOICE, 0.0, "C"),
    ("Choice: B", "b", CHOICE, 1.0, "B"),
    ("choice: B", "b", CHOICE, 0.0, None),  # the pattern itself is case-sensitive
    ("choice: B", "b", "(?i)" + CHOICE, 1.0, "B"),
    ("nothing here", "b", CHOICE, 0.0, None),
    ("x=1, x=2", "x=2", r"x=\d", 1.0, "x=2"),  # no group: the whole match
    ("x=1, x=2", "x=1", r"x=\d", 0.0, "x=2"),
    ("a1 b", "1", r"[ab](\d)?", 1.0, "1"),  # a match whose group did not take part is skipped
    ("Final:  Foo  bar.", "foo bar", r"Final:(.*)", 1.0, "Foo  bar."),  # compared as exact compares
]


@pytest.mark.parametrize(("response", "ground_truth", "pattern", "expected", "extracted"), REGEX_GOLDEN)
def test_regex_golden(response: str, ground_truth: str, pattern: str, expected: float, extracted: str | None) -> None:
    result = grade_regex(response, ground_truth, GradeSettings(format_score=0.25), pattern=pattern)
    assert result["acc"] == expected
    assert result["extracted"] == extracted
    assert result["formatted"] == (extracted is not None)
    assert result["score"] == (expected or (0.25 if result["formatted"] else 0.0))


def test_regex_case_sensitive() -> None:
    assert grade_regex("Choice: B", "b", pattern=CHOICE, case_sensitive=True)["score"] == 0.0
    assert grade_regex("Choice: B", "B", pattern=CHOICE, case_sensitive=True)["score"] == 1.0


def test_registry_and_dispatch() -> None:
    assert set(GRADERS) == set(GRADER_OPTIONS) == {"gsm8k", "math", "exact", "regex", "countdown", "reasoning_gym"}
    assert GRADERS["gsm8k"] is grade
    for response, truth in [("#### 1,000", "1000"), ("\\boxed{0.5}", "1/2"), ("#### 17", "18"), ("no", "3")]:
        assert grade_item("gsm8k", response, truth, settings=WITH_FORMAT_SCORE) == grade(
            response, truth, WITH_FORMAT_SCORE
        )
    assert grade_item("math", "\\boxed{\\frac{2}{4}}", "0.5")["score"] == 1.0
    assert grade_item("exact", "#### Paris", "paris", {"case_sensitive": True})["score"] == 0.0
    assert grade_item("regex", "Choice: B", "b", {"pattern": r"Choice: (\w)"})["score"] == 1.0
    with pytest.raises(ValueError, match=r"unknown grader 'nope'; choose one of \['countdown', 'exact'"):
        grade_item("nope", "#### 1", "1")


def test_countdown_dispatch() -> None:
    countdown = pytest.importorskip("relay.scoring.countdown")
    response, truth = "So \\boxed{(7 - 3) \\times 5 + 2}", "3,5,7,2=22"
    assert grade_item("countdown", response, truth) == countdown.grade(response, truth)
    assert grade_item("countdown", response, truth)["score"] == 1.0
    assert grade_item("countdown", "\\boxed{7+3+5+2}", truth, settings=WITH_FORMAT_SCORE)["score"] == 0.1
    assert check_grader("countdown", {}) == []


# (grader, response, ground truth, options, strict acc, lenient acc): the last number read when the strict answer
# is missing or wrong, by the grader's own comparison.
LENIENT_GOLDEN: list[tuple[str, str, str, dict | None, float, float]] = [
    ("exact", "\\boxed{9}, or rather 5 + 3 = 8", "8", None, 0.0, 1.0),  # the boxed answer wrong, the last number right
    ("exact", "it is 8", "8", None, 0.0, 1.0),  # no answer where the prompt asked
    ("exact", "it is 7", "8", None, 0.0, 0.0),
    ("exact", "no number", "8", None, 0.0, 0.0),
    ("exact", "\\boxed{8} (not 9)", "8", None, 1.0, 1.0),  # strictly right stays right
    ("gsm8k", "She pays 1,000 dollars in all", "1000", None, 0.0, 1.0),
    ("math", "so it is 0.5", "\\frac{1}{2}", None, 0.0, 1.0),  # math-verify's comparison
    ("regex", "the pick is 3", "3", {"pattern": "Choice: (\\d)"}, 0.0, 1.0),
    ("countdown", "7 + 3 * 5 = 22", "3,5,7=22", None, 0.0, 1.0),  # an expression reaching the target, unboxed
    ("countdown", "7 + 3 + 5 = 15, \\boxed{22}", "3,5,7=22", None, 0.0, 0.0),  # the number alone is no answer
]


@pytest.mark.parametrize(("grader", "response", "truth", "options", "strict", "lenient"), LENIENT_GOLDEN)
def test_lenient_acc_golden(grader: str, response: str, truth: str, options: Any, strict: float, lenient: float):
    assert grade_item(grader, response, truth, options)["acc"] == strict
    assert lenient_acc(grader, response, truth, strict, options) == lenient


CHECKS: list[tuple[str, Any, list[str]]] = [
    ("gsm8k", {}, []),
    ("math", None, []),
    ("exact", {"case_sensitive": True}, []),
    ("regex", {"pattern": CHOICE, "case_sensitive": False}, []),
    (
        "foo",
        {},
        [
            "reward.grader='foo': unknown; choose one of ['countdown', 'exact', 'gsm8k', 'math', 'reasoning_gym', "
            "'regex'] or a function 'package.module:callable'"
        ],
    ),
    (
        "regex",
        {},
        [
            "reward.grader_options.pattern: the 'regex' grader needs it; set it to a regular expression whose "
            "group 1 (or whole match) is the answer"
        ],
    ),
    (
        "regex",
        {"pattern": "(a"},
        [
            "reward.grader_options.pattern='(a': does not compile (missing ), unterminated subpattern at "
            "position 0); fix the expression"
        ],
    ),
    ("regex", {"pattern": 3}, ["reward.grader_options.pattern=3: must be a non-empty regular expression string"]),
    ("regex", {"pattern": ""}, ["reward.grader_options.pattern='': must be a non-empty regular expression string"]),
    (
        "regex",
        {"pattern": "x", "flags": 2},
        [
            "reward.grader_options.flags: not an option of the 'regex' grader; remove it "
            "(its options are ['case_sensitive', 'pattern'])"
        ],
    ),
    (
        "gsm8k",
        {"case_sensitive": True},
        ["reward.grader_options.case_sensitive: not an option of the 'gsm8k' grader; remove it (it takes no options)"],
    ),
    (
        "math",
        {"pattern": "x"},
        ["reward.grader_options.pattern: not an option of the 'math' grader; remove it (it takes no options)"],
    ),
    ("exact", {"case_sensitive": "yes"}, ["reward.grader_options.case_sensitive='yes': must be true or false"]),
    ("exact", [1], ["reward.grader_options=[1]: not a mapping; give option names and values"]),
]


@pytest.mark.parametrize(("name", "options", "problems"), CHECKS)
def test_check_grader(name: str, options: Any, problems: list[str]) -> None:
    assert check_grader(name, options) == problems


def test_check_grader_reports_every_problem_and_custom_keys() -> None:
    problems = check_grader("regex", {"flags": 2}, options_key="data.grader_options")
    assert [p.split(":")[0] for p in problems] == ["data.grader_options.flags", "data.grader_options.pattern"]
    assert check_grader("bar", {}, grader_key="data.grader")[0].startswith("data.grader='bar': unknown")


USER = "tests.relay.scoring.reward_fns"


def test_a_user_grader_is_called_per_response_with_its_options() -> None:
    assert grade_item(f"{USER}:starts_with", "Answer: 7 because", "7")["score"] == 1.0
    assert grade_item(f"{USER}:starts_with", "Result: 7", "7", {"prefix": "Result:"}) == {
        "score": 1.0,
        "acc": 1.0,
        "extracted": None,
        "formatted": True,
    }
    assert grade_item(f"{USER}:half_credit", "it is 7", "7") == {
        "score": 0.5,
        "acc": 0.0,
        "extracted": "7",
        "formatted": True,
    }
    with pytest.raises(ValueError, match="returned 'yes', not a number"):
        grade_item(f"{USER}:not_a_number", "x", "7")


def test_check_grader_imports_a_user_grader() -> None:
    assert check_grader(f"{USER}:starts_with", {"prefix": "A:"}) == []
    (problem,) = check_grader(f"{USER}:nope", {})
    assert problem == f"reward.grader='{USER}:nope': {USER} has no callable 'nope'"
    (problem,) = check_grader("no_such_module_xyz:f", {})
    assert problem.startswith("reward.grader='no_such_module_xyz:f': cannot import 'no_such_module_xyz'")
