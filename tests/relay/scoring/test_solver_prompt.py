"""Solver-mode prompt building and the per-response reward (pure functions, golden values)."""

from __future__ import annotations

import numpy as np
import pytest

from relay.scoring.solver_prompt import (
    DEFAULT_SOLVER_TEMPLATE,
    fit_guideline,
    mean_correctness,
    solver_messages,
    template_problems,
)


def test_default_template_is_usable() -> None:
    assert template_problems(DEFAULT_SOLVER_TEMPLATE) == []


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("Q: {question}\nHint: {guideline}", []),
        ("{guideline} first, then {question}; {{literal}}", []),
        ("{question}", ["missing field {guideline}"]),
        ("no fields", ["missing field {guideline}", "missing field {question}"]),
        (
            "{question} {guideline} {answer}",
            ["unknown field {answer} (use {question} and {guideline}; write {{ }} for literal braces)"],
        ),
    ],
)
def test_template_problems(template: str, expected: list[str]) -> None:
    assert template_problems(template) == expected


def test_unbalanced_brace_is_reported_not_raised() -> None:
    (problem,) = template_problems("{question} {guideline")
    assert problem.startswith("not a format string")


def test_solver_messages_fill_question_and_guideline() -> None:
    system, user = solver_messages("  What is 2+3? ", "\nAdd them.\n", "Q: {question} | G: {guideline}")
    assert system["role"] == "system" and user == {"role": "user", "content": "Q: What is 2+3? | G: Add them."}


def test_fit_guideline_keeps_the_beginning() -> None:
    def encode(text: str) -> list[str]:
        return text.split()

    def decode(tokens: list[str]) -> str:
        return " ".join(tokens)

    assert fit_guideline("a b c d e", 3, encode, decode) == ("a b c", True)
    assert fit_guideline("a b c", 3, encode, decode) == ("a b c", False)
    assert fit_guideline("a b c", 0, encode, decode) == ("", True)
    assert fit_guideline("a b c", -4, encode, decode) == ("", True)


@pytest.mark.parametrize(
    ("correct", "n", "expected"),
    [
        ([1, 0, 1, 1, 0, 0], 2, [0.5, 1.0, 0.0]),
        ([1, 0, 1], 1, [1.0, 0.0, 1.0]),
        ([1, 1, 0, 0, 0, 1, 0, 1], 4, [0.5, 0.5]),
        ([], 3, []),
    ],
)
def test_mean_correctness_golden(correct: list[int], n: int, expected: list[float]) -> None:
    out = mean_correctness(correct, n)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.array(expected, np.float32))


def test_mean_correctness_rejects_a_ragged_layout() -> None:
    with pytest.raises(ValueError, match="do not split into groups of solver_n=2"):
        mean_correctness([1, 0, 1], 2)
