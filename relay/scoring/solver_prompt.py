"""Solver-mode reward, the pure parts: the solver's prompt and the per-response reward.

In solver mode the policy writes a *guideline* for a question; a frozen solver model answers
``question + guideline``; the solver's answers are graded against the ground truth, and the policy's
reward is the solver's mean correctness over its ``solver_n`` samples.

Worked example (``solver_n = 2``, 3 policy responses): the solver's 6 answers grade
``[1, 0, 1, 1, 0, 0]`` (sample-major per response), so the rewards are ``[0.5, 1.0, 0.0]``.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence

import numpy as np

SOLVER_SYSTEM_PROMPT = "You are a careful math tutor."

# The user turn of the solver's chat prompt; {question} and {guideline} are filled in.
DEFAULT_SOLVER_TEMPLATE = (
    "{question}\n"
    "A teacher's guideline for this problem:\n"
    "{guideline}\n"
    "Follow the guideline. Solve it step by step in a few short sentences, then write the final answer "
    "as '#### <number>'."
)

SOLVER_FIELDS = frozenset({"question", "guideline"})


def template_problems(template: str) -> list[str]:
    """What is wrong with a solver prompt template (empty when it is usable).

    >>> template_problems("{question} {guideline}")
    []
    >>> template_problems("{question}")
    ['missing field {guideline}']
    """
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:  # an unmatched brace
        return [f"not a format string ({exc}); write {{{{ }}}} for literal braces"]
    problems = [
        f"unknown field {{{name}}} (use {{question}} and {{guideline}}; write {{{{ }}}} for literal braces)"
        for name in dict.fromkeys(fields)
        if name not in SOLVER_FIELDS
    ]
    problems += [f"missing field {{{name}}}" for name in sorted(SOLVER_FIELDS) if name not in fields]
    return problems


def solver_messages(question: str, guideline: str, template: str = DEFAULT_SOLVER_TEMPLATE) -> list[dict[str, str]]:
    """Chat messages (system + user) asking the solver to answer ``question`` following ``guideline``."""
    return [
        {"role": "system", "content": SOLVER_SYSTEM_PROMPT},
        {"role": "user", "content": template.format(question=question.strip(), guideline=guideline.strip())},
    ]


def fit_guideline(
    guideline: str, budget_tokens: int, encode: Callable[[str], list[int]], decode: Callable[[list[int]], str]
) -> tuple[str, bool]:
    """Cut ``guideline`` to its first ``budget_tokens`` tokens; returns ``(text, was_cut)``.

    The policy's output can be as long as ``data.max_response_length``; the solver's prompt must fit
    ``reward.solver_max_prompt_length``, so the guideline keeps its beginning and loses its tail.
    """
    tokens = encode(guideline)
    if len(tokens) <= budget_tokens:
        return guideline, False
    return decode(tokens[: max(budget_tokens, 0)]), True


def mean_correctness(correct: Sequence[float] | np.ndarray, solver_n: int) -> np.ndarray:
    """Per-response reward from the solver's per-sample correctness, laid out response-major.

    >>> mean_correctness([1, 0, 1, 1, 0, 0], 2).tolist()
    [0.5, 1.0, 0.0]
    """
    flat = np.asarray(correct, dtype=np.float32)
    if solver_n < 1 or flat.size % solver_n:
        raise ValueError(f"{flat.size} solver results do not split into groups of solver_n={solver_n}")
    return flat.reshape(-1, solver_n).mean(axis=1)
