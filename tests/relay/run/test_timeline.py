"""timeline.json: Chrome trace events per role, and each role's busy share of the wall time."""

from __future__ import annotations

import json
import threading

import pytest

from relay.run import timeline
from relay.run.summarize import summarize
from relay.run.timeline import Span, Timeline, busy_shares, chrome_trace, spans_from_trace


def test_busy_shares_golden() -> None:
    spans = [
        Span("rollout", "generate", 100.0, 104.0, 0),
        Span("learner", "update", 104.0, 109.0, 0),
        Span("rollout", "generate", 106.0, 110.0, 1),
        Span("rollout", "load_weights", 109.5, 109.8, 1),  # inside a generate span: counted once
    ]
    assert busy_shares(spans) == pytest.approx({"rollout": 0.8, "learner": 0.5})
    assert busy_shares([]) == {}


def test_chrome_trace_round_trip(tmp_path) -> None:
    spans = [Span("learner", "update", 10.0, 12.5, 3), Span("rollout", "generate", 9.0, 10.0, 4)]
    trace = chrome_trace(spans)
    tracks = {e["args"]["name"]: e["tid"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert tracks == {"rollout": 1, "learner": 2}  # the roles' order in a step, not the spans'
    first = next(e for e in trace["traceEvents"] if e["ph"] == "X")
    assert (first["name"], first["ts"], first["dur"], first["args"]) == ("generate", 0, 1_000_000, {"step": 4})
    back = spans_from_trace(json.loads(json.dumps(trace)))
    got = sorted((s.role, s.start, s.end, s.step) for s in back)
    assert got == [("learner", 1.0, 3.5, 3), ("rollout", 0.0, 1.0, 4)]


def test_record_goes_to_the_timeline_in_use_from_any_thread(tmp_path) -> None:
    spans = Timeline()
    timeline.use(spans)
    try:
        worker = threading.Thread(target=timeline.record, args=("reward", "grade", 1.0, 2.0, 0))
        worker.start()
        worker.join()
        timeline.record("learner", "update", 2.0, 1.5, 0)  # an end before the start is clipped to it
    finally:
        timeline.use(None)
    timeline.record("learner", "update", 5.0, 6.0, 1)  # recording off: dropped
    assert [(s.role, s.end) for s in spans.snapshot()] == [("reward", 2.0), ("learner", 2.0)]
    path = spans.write(tmp_path)
    assert path.name == "timeline.json" and len(json.loads(path.read_text())["traceEvents"]) == 4


def test_summarize_reports_utilisation_and_draws_the_timeline(tmp_path) -> None:
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 0, "timing/step": 10.0}) + "\n")
    spans = Timeline()
    spans.record("rollout", "generate", 0.0, 4.0, 0)
    spans.record("learner", "update", 4.0, 10.0, 0)
    spans.write(tmp_path)
    text, plots = summarize(tmp_path)
    assert "| rollout | 4.0 | 40% |" in text and "| learner | 6.0 | 60% |" in text
    assert (tmp_path / "plots" / "timeline.png").is_file()
