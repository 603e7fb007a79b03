"""Worked sums as a warm start's traces: each two-term sum among the run's own training rows, answered column by
column (:func:`relay.tasks.sums.worked_sum`) and boxed as the run's strict grader wants it.

Why: a model that answers ``a + b = s`` on one line gets a carried sum wrong in every sample (SmolLM2-135M's
plateau on the arithmetic preset: the sums with a carry), so GRPO has no right answer to reinforce. A warm start
on the written procedure gives it a way to a right answer first. The traces come from the training rows the GRPO
run would draw (``data.*``: the held-out problems and their commutative twins already left out), so the warm start
sees no held-out problem either.

Worked example: the row ``"Calculate 47 + 8."`` whose answer is ``55`` gives the one trained segment::

    ones: 7 + 8 = 15, write 5 carry 1
    tens: 4 + 0 + 1 = 5, write 5
    47 + 8 = 55
    \\boxed{55}

``sft.traces=worked_sums_placed`` first names each term's digits by column
(:func:`relay.tasks.sums.placed_digits`: ``47: tens 4, ones 7`` and ``8: tens 0, ones 8``), then works the same
columns: a warm start of 20 steps on the plain form took one-digit terms' digits for tens digits (``8 + 3`` worked as
``tens: 8 + 3 + 1``). Measured against the plain form at 20 steps on the dev split it does not help (0.700 against
0.730 strict, paired -0.030 [-0.110, +0.050]; BENCHMARKS.md, "Which worked-sum form a short warm start learns from"):
its columns are placed right and added wrong, and its traces are ~30% longer.

A row that is not a two-term sum of whole numbers is skipped as ``not_a_two_term_sum``; one whose recorded answer
is not the sum, as ``answer_mismatch`` (both counted in the warm start's ``data`` event).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from relay.data.gsm8k import Example
from relay.scoring.reasoning_gym import answer_of
from relay.sft.gsm8k_traces import Trace, TraceError
from relay.tasks.sums import placed_worked_sum, terms, worked_sum

REASONS = ("not_a_two_term_sum", "answer_mismatch")
# sft.traces -> how a sum is worked
WORKINGS: dict[str, Callable[[int, int], str]] = {"worked_sums": worked_sum, "worked_sums_placed": placed_worked_sum}


def expected_answer(ground_truth: str) -> str:
    """A row's answer: a reasoning-gym ground truth's ``answer``, else the ground truth itself (a file's column).

    >>> expected_answer('{"dataset": "basic_arithmetic", "answer": "55"}'), expected_answer(" 55 ")
    ('55', '55')
    """
    try:
        return answer_of(ground_truth).strip()
    except ValueError:
        return ground_truth.strip()


def worked_sum_trace(example: Example, traces: str = "worked_sums") -> Trace:
    """``example``'s sum worked as ``traces`` (:data:`WORKINGS`) and boxed, one trained segment (module docstring);
    TraceError when it is not a two-term sum or its answer is not the sum."""
    found = terms(example.question)
    if found is None:
        raise TraceError("not_a_two_term_sum", f"{example.uid}: {example.question!r}")
    a, b = found
    if expected_answer(example.ground_truth) != str(a + b):
        raise TraceError("answer_mismatch", f"{example.uid}: {a} + {b} = {a + b}, the row says {example.ground_truth}")
    return Trace(example.uid, example.question, ((f"{WORKINGS[traces](a, b)}\n\\boxed{{{a + b}}}", True),), 0)


def sum_traces(
    examples: Iterable[Example], limit: int | None = None, traces: str = "worked_sums"
) -> tuple[list[Trace], dict[str, int]]:
    """The ``traces`` of the first ``limit`` rows of ``examples`` (all when None) and the skipped rows by reason."""
    made: list[Trace] = []
    skipped: Counter[str] = Counter()
    for i, example in enumerate(examples):
        if limit is not None and i >= limit:
            break
        try:
            made.append(worked_sum_trace(example, traces))
        except TraceError as exc:
            skipped[exc.reason] += 1
    return made, dict(skipped)
