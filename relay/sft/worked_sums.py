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

A row that is not a two-term sum of whole numbers is skipped as ``not_a_two_term_sum``; one whose recorded answer
is not the sum, as ``answer_mismatch`` (both counted in the warm start's ``data`` event).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from relay.data.gsm8k import Example
from relay.scoring.reasoning_gym import answer_of
from relay.sft.gsm8k_traces import Trace, TraceError
from relay.tasks.sums import terms, worked_sum

REASONS = ("not_a_two_term_sum", "answer_mismatch")


def expected_answer(ground_truth: str) -> str:
    """A row's answer: a reasoning-gym ground truth's ``answer``, else the ground truth itself (a file's column).

    >>> expected_answer('{"dataset": "basic_arithmetic", "answer": "55"}'), expected_answer(" 55 ")
    ('55', '55')
    """
    try:
        return answer_of(ground_truth).strip()
    except ValueError:
        return ground_truth.strip()


def worked_sum_trace(example: Example) -> Trace:
    """``example``'s sum worked and boxed, one trained segment (module docstring); TraceError when it is not a
    two-term sum or its answer is not the sum."""
    found = terms(example.question)
    if found is None:
        raise TraceError("not_a_two_term_sum", f"{example.uid}: {example.question!r}")
    a, b = found
    if expected_answer(example.ground_truth) != str(a + b):
        raise TraceError("answer_mismatch", f"{example.uid}: {a} + {b} = {a + b}, the row says {example.ground_truth}")
    return Trace(example.uid, example.question, ((f"{worked_sum(a, b)}\n\\boxed{{{a + b}}}", True),), 0)


def sum_traces(examples: Iterable[Example], limit: int | None = None) -> tuple[list[Trace], dict[str, int]]:
    """The traces of the first ``limit`` rows of ``examples`` (all when None) and the skipped rows by reason."""
    traces: list[Trace] = []
    skipped: Counter[str] = Counter()
    for i, example in enumerate(examples):
        if limit is not None and i >= limit:
            break
        try:
            traces.append(worked_sum_trace(example))
        except TraceError as exc:
            skipped[exc.reason] += 1
    return traces, dict(skipped)
