"""GSM8K solutions as calculator tool traces and plain chains of thought, on the repo's real GSM8K rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from relay.agent.tool_call import CALL_CLOSE, RESULT_CLOSE, RESULT_OPEN, parse_tool_call, result_text
from relay.data.gsm8k import gsm8k_ground_truth
from relay.scoring.answer import extract_answer, normalize_answer
from relay.sft.gsm8k_traces import REASONS, Trace, TraceError, convert_file, main, plain_trace, tool_trace
from relay.tools import ToolLimits
from relay.tools.calculator import calculate

DATA = Path(__file__).resolve().parents[3] / "data" / "gsm8k"
TRAIN, TEST = DATA / "train.jsonl", DATA / "test.jsonl"


def _row(path: Path, lineno: int) -> dict[str, str]:
    with path.open(encoding="utf-8") as f:
        for k, line in enumerate(f, start=1):
            if k == lineno:
                return json.loads(line)
    raise IndexError(lineno)


@pytest.fixture(scope="module")
def train_tools() -> tuple[list[Trace], dict[str, int]]:
    return convert_file(TRAIN, "tools")


# (line of train.jsonl, its calculator calls, its tool trace's segments: text and whether it is trained)
TOOL_TRACE_GOLDEN = [
    (  # Natalia: two annotations
        1,
        2,
        (
            ("Natalia sold 48/2 = <tool_call>calculator: 48/2</tool_call>", True),
            ("<tool_result>24</tool_result>", False),
            (" clips in May.\nNatalia sold 48+24 = <tool_call>calculator: 48+24</tool_call>", True),
            ("<tool_result>72</tool_result>", False),
            (" clips altogether in April and May.\n#### 72", True),
        ),
    ),
    (  # Betty: three annotations, each after a '$': the text before each call is kept
        3,
        3,
        (
            ("In the beginning, Betty has only 100 / 2 = $<tool_call>calculator: 100/2</tool_call>", True),
            ("<tool_result>50</tool_result>", False),
            (".\nBetty's grandparents gave her 15 * 2 = $<tool_call>calculator: 15*2</tool_call>", True),
            ("<tool_result>30</tool_result>", False),
            (".\nThis means, Betty needs 100 - 50 - 30 - 15 = $<tool_call>calculator: 100-50-30-15</tool_call>", True),
            ("<tool_result>5</tool_result>", False),
            (" more.\n#### 5", True),
        ),
    ),
]


@pytest.mark.parametrize(("lineno", "calls", "segments"), TOOL_TRACE_GOLDEN)
def test_tool_trace_golden(lineno: int, calls: int, segments: tuple[tuple[str, bool], ...]) -> None:
    row = _row(TRAIN, lineno)
    trace = tool_trace(row["question"], row["answer"], f"train-{lineno}")
    assert trace.uid == f"train-{lineno}" and trace.question == row["question"] and trace.calls == calls
    assert trace.segments == segments


def test_first_row_plain_trace_golden() -> None:
    row = _row(TRAIN, 1)
    trace = plain_trace(row["question"], row["answer"], "train-1")
    text = "Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = 72 clips altogether in April and May.\n#### 72"
    assert trace.segments == ((text, True),) and trace.calls == 0


def test_row_without_annotations_is_one_trained_segment() -> None:
    row = _row(TRAIN, 30)
    assert "<<" not in row["answer"]
    trace = tool_trace(row["question"], row["answer"], "train-30")
    assert trace.calls == 0 and trace.segments == plain_trace(row["question"], row["answer"], "train-30").segments


def test_share_converted_over_the_whole_training_file(train_tools) -> None:
    traces, skipped = train_tools
    total = len(traces) + sum(skipped.values())
    share = len(traces) / total
    print(f"converted {len(traces)}/{total} = {share:.2%}; skipped {skipped}")
    assert total == 7473 and share > 0.9
    assert set(skipped) <= set(REASONS)
    assert [t.uid for t in traces[:3]] == ["train-1", "train-2", "train-3"]
    assert 2.5 < sum(t.calls for t in traces) / len(traces) < 4


def test_real_rows_that_do_not_convert_found_by_scanning() -> None:
    """Every row of both GSM8K files is tried; those that fail, with their reasons."""
    failures = {}
    for path in (TRAIN, TEST):
        with path.open(encoding="utf-8") as f:
            for lineno, line in enumerate(f, start=1):
                row = json.loads(line)
                try:
                    tool_trace(row["question"], row["answer"], f"{path.stem}-{lineno}")
                except TraceError as exc:
                    failures[f"{path.stem}-{lineno}"] = exc.reason
    assert failures == {"test-320": "malformed_annotation"}  # '<<3/4=3/4>>': the result is a fraction
    row = _row(TEST, 320)
    with pytest.raises(TraceError, match=r"'<<3/4=3/4>>' is not <<expression=number>>"):
        tool_trace(row["question"], row["answer"], "test-320")
    assert plain_trace(row["question"], row["answer"], "test-320").text.endswith("#### 15")


@pytest.mark.parametrize(
    ("lineno", "old", "new", "reason"),
    [
        (6701, "<<2.5/20=.125>>.125", "<<2.5/20=.13>>.13", "result_mismatch"),  # rounded
        (1, "<<48+24=72>>72", "<<48+24=70>>70", "result_mismatch"),  # wrong
        (1, "<<48/2=24>>", "<<48 / 2 of them=24>>", "calculator_error"),
        (1, "<<48/2=24>>", "<<48/2 24>>", "malformed_annotation"),  # no '='
        (1, "<<48/2=24>>", "<<48/2=24>", "malformed_annotation"),  # unclosed
        (1, "<<48/2=24>>24", "<<48/2=24>>42", "visible_number_mismatch"),
        (1, "\n#### 72", "", "no_final_answer"),
        (1, "#### 72", "#### <<48+24=72>>72", "answer_mismatch"),
    ],
)
def test_edited_real_rows_are_refused_with_their_reason(lineno: int, old: str, new: str, reason: str) -> None:
    row = _row(TRAIN, lineno)
    assert old in row["answer"]
    with pytest.raises(TraceError) as info:
        tool_trace(row["question"], row["answer"].replace(old, new), f"train-{lineno}")
    assert info.value.reason == reason


def test_no_tool_result_is_trained_and_calls_alternate_with_results(train_tools) -> None:
    for trace in train_tools[0]:
        assert trace.segments[-1][1] and sum(not trained for _, trained in trace.segments) == trace.calls
        for k, (text, trained) in enumerate(trace.segments):
            if trained:
                assert RESULT_OPEN not in text and RESULT_CLOSE not in text
            else:
                assert text.startswith(RESULT_OPEN) and text.endswith(RESULT_CLOSE) and text.count(RESULT_OPEN) == 1
                assert trace.segments[k - 1][1] and trace.segments[k - 1][0].endswith(CALL_CLOSE)


def test_every_call_parses_and_its_result_is_the_calculators(train_tools) -> None:
    calls = 0
    for trace in train_tools[0]:
        for (turn, _), (result, trained) in zip(trace.segments, trace.segments[1:], strict=False):
            if trained:
                continue
            parsed = parse_tool_call(turn)
            assert not parsed.error and parsed.name == "calculator"
            assert result == result_text(calculate(parsed.argument, ToolLimits()))
            calls += 1
    assert calls == sum(t.calls for t in train_tools[0])


def test_final_answer_is_the_ground_truth(train_tools) -> None:
    lines = TRAIN.read_text(encoding="utf-8").splitlines()
    rows = {f"train-{k}": json.loads(line) for k, line in enumerate(lines, start=1)}
    for trace in train_tools[0]:
        assert extract_answer(trace.text) == normalize_answer(gsm8k_ground_truth(rows[trace.uid]["answer"]))


def test_convert_file_plain_limit_and_cli(capsys) -> None:
    traces, skipped = convert_file(TRAIN, "plain", limit=50)
    assert len(traces) == 50 and skipped == {} and all(len(t.segments) == 1 and t.calls == 0 for t in traces)
    assert all("<<" not in t.text and ">>" not in t.text for t in traces)
    with pytest.raises(ValueError, match="unknown form"):
        convert_file(TRAIN, "json")
    main(["--path", str(TEST), "--form", "tools", "--limit", "400"])
    out = json.loads(capsys.readouterr().out)
    assert out["converted"] == 399 and out["skipped_by_reason"] == {"malformed_annotation": 1}
    assert out["skipped"] == 1 and out["mean_calls"] > 0
