"""relay.sft.worked_sums: the run's sums as worked, boxed traces; rows that are not sums, or whose answer is not the
sum, are skipped and counted."""

from __future__ import annotations

import doctest
import json

from relay.data.gsm8k import Example
from relay.sft import worked_sums
from relay.sft.worked_sums import sum_traces, worked_sum_trace


def _row(uid: str, question: str, answer: str) -> Example:
    return Example(uid, question, json.dumps({"dataset": "basic_arithmetic", "answer": answer, "metadata": {}}))


def test_the_module_examples_hold() -> None:
    assert doctest.testmod(worked_sums).failed == 0


def test_a_sum_becomes_one_trained_segment_ending_in_its_boxed_answer() -> None:
    trace = worked_sum_trace(_row("rg-1", "Calculate 47 + 8.", "55"))
    assert trace.uid == "rg-1" and trace.question == "Calculate 47 + 8." and trace.calls == 0
    assert trace.segments == (
        ("ones: 7 + 8 = 15, write 5 carry 1\ntens: 4 + 0 + 1 = 5, write 5\n47 + 8 = 55\n\\boxed{55}", True),
    )
    assert worked_sum_trace(Example("f-1", "What is 2 + 2?", " 4 ")).text.endswith("\\boxed{4}")


def test_rows_that_are_not_sums_or_disagree_with_their_answer_are_skipped_by_reason() -> None:
    rows = [
        _row("a", "Calculate 3 + 4.", "7"),
        _row("b", "Calculate 3 - 4.", "-1"),
        _row("c", "Calculate 10 + 5.", "16"),
        _row("d", "Calculate 1 + 2 + 3.", "6"),
        _row("e", "Calculate 90 + 19.", "109"),
    ]
    traces, skipped = sum_traces(rows)
    assert [t.uid for t in traces] == ["a", "e"]
    assert skipped == {"not_a_two_term_sum": 2, "answer_mismatch": 1}
    assert [t.uid for t in sum_traces(rows, limit=3)[0]] == ["a"]


def test_placed_traces_name_each_terms_columns_before_working_them() -> None:
    trace = worked_sum_trace(_row("rg-1", "Calculate 8 + 3.", "11"), "worked_sums_placed")
    assert trace.segments == (
        (
            "8: ones 8\n3: ones 3\nones: 8 + 3 = 11, write 1 carry 1\ntens: carry 1, write 1\n8 + 3 = 11\n\\boxed{11}",
            True,
        ),
    )
    placed, skipped = sum_traces(
        [_row("a", "Calculate 47 + 8.", "55"), _row("b", "Calculate 3 - 4.", "-1")], None, "worked_sums_placed"
    )
    assert [t.text.splitlines()[:2] for t in placed] == [["47: tens 4, ones 7", "8: tens 0, ones 8"]]
    assert skipped == {"not_a_two_term_sum": 1}
