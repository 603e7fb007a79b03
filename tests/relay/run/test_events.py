"""events.jsonl: one JSON object per line with time and kind, JSON-safe values, readable while written."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from relay.run.events import EVENT_KINDS, EventLog, read_events


def test_event_lines(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    log.write("start", run_name="r", steps=3)
    log.write("checkpoint", step=np.int64(2), path=tmp_path / "ckpt", loss=np.float32(0.5))
    log.write("validation", step=2, accuracy=np.array([0.25, 0.75]).mean(), per_prompt=np.array([1, 0]))
    log.write("skipped_batch", step=3, reason="all groups have equal scores", grad_norm=float("nan"))

    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    assert len(lines) == 4
    records = [json.loads(line) for line in lines]  # strict JSON: no NaN tokens
    assert [r["event"] for r in records] == ["start", "checkpoint", "validation", "skipped_batch"]
    for r in records:
        assert datetime.fromisoformat(r["time"]).utcoffset().total_seconds() == 0
        assert list(r)[:2] == ["time", "event"]
    assert records[1] == {**records[1], "step": 2, "path": str(tmp_path / "ckpt"), "loss": 0.5}
    assert records[2]["accuracy"] == 0.5 and records[2]["per_prompt"] == [1, 0]
    assert records[3]["grad_norm"] == "nan"
    assert "NaN" not in lines[3]


def test_each_event_is_on_disk_when_written(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    for i, kind in enumerate(EVENT_KINDS):
        log.write(kind, index=i)
        assert len(read_events(tmp_path)) == i + 1  # another process would see it now
    assert [e["event"] for e in read_events(tmp_path)] == list(EVENT_KINDS)


def test_read_events_skips_a_torn_last_line_and_missing_file(tmp_path: Path) -> None:
    assert read_events(tmp_path) == []
    EventLog(tmp_path).write("start")
    with (tmp_path / "events.jsonl").open("a") as f:
        f.write('{"time": "2025-01-01T00:00:00+00:00", "ev')
    assert [e["event"] for e in read_events(tmp_path)] == ["start"]


def test_reserved_field_names(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="reserved"):
        EventLog(tmp_path).write("error", time=1)


def _torn(line: str) -> str:
    """``line`` cut at half its length, as a run killed mid-write leaves it."""
    return line[: len(line) // 2]


def _event(kind: str, step: int) -> str:
    return json.dumps({"time": "2025-01-01T00:00:00.000+00:00", "event": kind, "step": step})


@pytest.mark.parametrize(
    "tail",
    [_torn(_event("checkpoint", 4)), _torn(_event("checkpoint", 4)) + "\n"],
    ids=["without-newline", "with-newline"],
)
def test_read_events_skips_a_last_line_torn_half_way(tmp_path: Path, tail: str) -> None:
    (tmp_path / "events.jsonl").write_text(_event("start", 0) + "\n" + tail)
    assert [e["event"] for e in read_events(tmp_path)] == ["start"]


def test_read_events_keeps_the_complete_lines_a_resumed_run_appended_after_a_torn_one(tmp_path: Path) -> None:
    lines = [_event("start", 0), _torn(_event("checkpoint", 4)), _event("resume", 2), _event("validation", 2)]
    (tmp_path / "events.jsonl").write_text("\n".join(lines) + "\n")
    assert [(e["event"], e["step"]) for e in read_events(tmp_path)] == [("start", 0), ("resume", 2), ("validation", 2)]


def test_an_event_written_after_a_torn_last_line_is_read_back(tmp_path: Path) -> None:
    """A run killed mid-write leaves a last line without its newline; the next append (a resumed run's) must start
    a line of its own, or it would be glued onto the torn one and lost with it."""
    path = tmp_path / "events.jsonl"
    path.write_text(_event("start", 0) + "\n" + _torn(_event("checkpoint", 4)))
    record = EventLog(tmp_path).write("resume", step=2)
    assert [e["event"] for e in read_events(tmp_path)] == ["start", "resume"]
    assert read_events(tmp_path)[-1] == record


def test_an_event_written_after_a_complete_line_adds_no_blank_line(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    for kind in ("start", "finish"):
        log.write(kind)
    text = (tmp_path / "events.jsonl").read_text()
    assert [json.loads(line)["event"] for line in text.split("\n")[:-1]] == ["start", "finish"]


def test_an_event_that_cannot_be_written_costs_the_event_not_the_error_path(tmp_path, capsys) -> None:
    """On a full disk the error path's own event fails too; its message must still reach the terminal."""
    log = EventLog(tmp_path)
    log.path.mkdir()  # a path that cannot be opened for appending: every write fails with an OSError
    record = log.write("error", kind="checkpoint_write", step=3)
    assert record["event"] == "error" and "the 'error' event was not written" in capsys.readouterr().err
