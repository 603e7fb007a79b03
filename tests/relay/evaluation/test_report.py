"""relay.evaluation.report: validation rows to the val/* metrics (per task, tool use) and per-response records."""

import numpy as np
import pytest

from relay.data_proto import DataProto


def _rows(texts: list[str], lengths: list[int], finished: list[bool], **batch: list[int]) -> DataProto:
    """Two problems ``a`` and ``b`` (answers 1 and 2), each a greedy row and one sample (k = 1)."""
    return DataProto.from_dict(
        batch={
            "sample_index": np.array([0, 1, 0, 1], np.int32),
            "response_length": np.array(lengths, np.int32),
            "finished": np.array(finished),
            **{key: np.array(values, np.int32) for key, values in batch.items()},
        },
        non_tensor={
            "uid": np.array(["a", "a", "b", "b"], dtype=object),
            "question": np.array(["q1", "q1", "q2", "q2"], dtype=object),
            "ground_truth": np.array(["1", "1", "2", "2"], dtype=object),
            "response_text": np.array(texts, dtype=object),
        },
    )


def test_per_source_metrics_golden() -> None:
    from relay.evaluation.report import per_source_metrics

    sources = np.array(["gsm8k", "math", "math"], dtype=object)
    # rows per problem: greedy, sample 1, sample 2
    strict = np.array([1, 1, 0, 0, 0, 0, 1, 0, 1])
    lenient = np.array([1, 1, 0, 1, 0, 0, 1, 1, 1])
    assert per_source_metrics(sources, strict, lenient, k=2) == {
        "val/gsm8k/accuracy_greedy": 1.0,
        "val/gsm8k/pass@2": 1.0,
        "val/gsm8k/mean@2": 0.5,
        "val/gsm8k/problems": 1.0,
        "val/gsm8k/lenient_accuracy_greedy": 1.0,
        "val/gsm8k/lenient_pass@2": 1.0,
        "val/gsm8k/lenient_mean@2": 0.5,
        "val/math/accuracy_greedy": 0.5,
        "val/math/pass@2": 0.5,
        "val/math/mean@2": 0.25,
        "val/math/problems": 2.0,
        "val/math/lenient_accuracy_greedy": 1.0,
        "val/math/lenient_pass@2": 0.5,
        "val/math/lenient_mean@2": 0.5,
    }


def test_accuracy_metrics_golden() -> None:
    """Strict and lenient side by side, each greedy accuracy with its Wilson interval (module docstring's example)."""
    from relay.evaluation.report import accuracy_metrics

    out = accuracy_metrics(np.array([1, 0, 0, 0]), np.array([1, 1, 1, 0]), k=1)
    assert out["val/accuracy_greedy"] == 0.5 and out["val/lenient_accuracy_greedy"] == 1.0
    assert out["val/mean@1"] == 0.0 and out["val/lenient_mean@1"] == 0.5
    assert out["val/pass@1"] == 0.0 and out["val/lenient_pass@1"] == 0.5
    assert out["val/problems"] == 2.0 and "val/lenient_problems" not in out
    interval = (out["val/accuracy_greedy_ci_low"], out["val/accuracy_greedy_ci_high"])
    assert interval == pytest.approx((0.0945, 0.9055), abs=1e-4)
    assert out["val/lenient_accuracy_greedy_ci_low"] == pytest.approx(0.3424, abs=1e-4)
    assert out["val/lenient_accuracy_greedy_ci_high"] == 1.0


def test_lenient_accuracy_and_majority_baseline_in_validation() -> None:
    """The reward role's ``acc_lenient`` gives the lenient figures; rows with their answers give the baseline;
    a split of subsets gives each subset's figures."""
    from relay.evaluation.report import validation_metrics

    rows = _rows(["\\boxed{1}", "x", "so 2", "\\boxed{2}"], [5, 6, 7, 8], [True, True, True, True])
    rows.non_tensor["reference_answer"] = np.array(["1", "1", "1", "1"], dtype=object)
    rows.non_tensor["subset"] = np.array(["easy", "easy", "hard", "hard"], dtype=object)
    acc = {"acc": np.array([1, 0, 0, 1], np.float32), "acc_lenient": np.array([1, 0, 1, 1], np.float32)}
    out = validation_metrics(rows, [DataProto.from_dict(batch=acc)], k=1)
    assert out["val/accuracy_greedy"] == 0.5 and out["val/lenient_accuracy_greedy"] == 1.0
    assert out["val/format_rate_greedy"] == 0.5
    assert out["val/majority_baseline"] == 1.0  # both problems answer "1"
    assert out["val/hard/accuracy_greedy"] == 0.0 and out["val/hard/lenient_accuracy_greedy"] == 1.0
    assert out["val/easy/mean@1"] == 0.0 and out["val/hard/mean@1"] == 1.0


def test_validation_of_a_mixed_dataset_reports_each_source() -> None:
    """Rows carrying ``data_source`` (greedy + one sample per problem) give each task's figures beside the totals."""
    from relay.evaluation.report import grading_chunks, validation_metrics

    sources = np.array(["math", "math", "gsm8k", "gsm8k"], dtype=object)
    rows = _rows(["\\boxed{1}", "\\boxed{3}", "#### 5", "#### 2"], [5, 6, 7, 8], [True, True, True, False])
    rows.non_tensor["data_source"] = sources
    (chunk,) = grading_chunks(rows)
    assert list(chunk.non_tensor["data_source"]) == list(sources)  # the reward role sees each row's task
    graded = [DataProto.from_dict(batch={"acc": np.array([1.0, 0.0, 0.0, 1.0], np.float32)})]
    out = validation_metrics(rows, graded, k=1)
    assert out["val/accuracy_greedy"] == 0.5 and out["val/pass@1"] == 0.5
    assert (out["val/math/accuracy_greedy"], out["val/math/pass@1"]) == (1.0, 0.0)
    assert (out["val/gsm8k/accuracy_greedy"], out["val/gsm8k/pass@1"]) == (0.0, 1.0)


def test_tool_use_of_greedy_multi_turn_rows() -> None:
    """Calls per greedy response, and the share of their calls that parse; sampled rows are not counted."""
    from relay.evaluation.report import validation_metrics

    good = "<tool_call>calculator: 2+2</tool_call><tool_result>4</tool_result>"
    bad = "<tool_call>2*3</tool_call><tool_result>error: malformed</tool_result>"
    # two problems, each a greedy row and one sample (k = 1)
    texts = [f"{good} {bad} #### 4", f"{bad} {bad} #### 1", "#### 2", f"{bad} #### 2"]
    rows = _rows(texts, [9, 9, 3, 6], [True] * 4, tool_calls=[2, 2, 0, 1])
    graded = [DataProto.from_dict(batch={"acc": np.array([1.0, 0.0, 0.0, 1.0], np.float32)})]
    out = validation_metrics(rows, graded, k=1)
    assert out["val/tool_call_rate_greedy"] == 0.5 and out["val/tool_calls_per_response_greedy"] == 1.0
    assert out["val/tool_call_parse_rate_greedy"] == 0.5 and out["val/correct_with_tool_share_greedy"] == 1.0


def test_tool_call_parse_rate_golden() -> None:
    from relay.evaluation.report import tool_call_parse_rate

    assert tool_call_parse_rate(["no calls here", "#### 3"]) is None
    texts = ["<tool_call>calculator: 1+1</tool_call> <tool_call>1+1</tool_call>", "#### 2"]
    assert tool_call_parse_rate(texts) == 0.5
    json_call = '<tool_call>{"name": "calculator", "arguments": {"expression": "3*4"}}</tool_call>'
    assert tool_call_parse_rate([json_call, "<tool_call>calculator: 3*4"]) == 1.0  # an unclosed span is no call


def test_response_records_keep_each_row_with_its_grade() -> None:
    """One record per row in row order, graded across chunks; a row count that does not match the grades is an
    error, not a silent truncation."""
    import pytest

    from relay.evaluation.report import response_records

    texts = ["#### 1", "#### 3", "#### 5", "#### 2"]
    rows = _rows(texts, [5, 6, 7, 8], [True, False, True, True], tool_calls=[1, 0, 0, 2])
    graded = [
        DataProto.from_dict(batch={"acc": np.array(a, np.float32), "acc_lenient": np.array(b, np.float32)})
        for a, b in (([1.0, 0.0], [1.0, 1.0]), ([0.0, 1.0], [0.0, 1.0]))
    ]
    records = response_records(rows, graded)
    assert [(r["uid"], r["sample"], r["correct"]) for r in records] == [
        ("a", 0, True),
        ("a", 1, False),
        ("b", 0, False),
        ("b", 1, True),
    ]
    assert records[1] == {
        "uid": "a",
        "sample": 1,
        "question": "q1",
        "ground_truth": "1",
        "response": "#### 3",
        "correct": False,
        "correct_lenient": True,  # the right number, not where the prompt asked for it
        "finished": False,
        "response_tokens": 6,
        "tool_calls": 0,
    }
    with pytest.raises(ValueError, match="4 validation rows but 2 grades"):
        response_records(rows, graded[:1])
