"""``truncate_metrics`` on ``--resume``: a torn ``metrics.jsonl`` never breaks a resume, and the rewrite is atomic."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from driver.checkpoints import truncate_metrics
from relay.run.sinks import JsonlSink
from relay.run.summarize import load_metrics


def _row(step: int) -> str:
    return json.dumps({"reward/mean": 0.5, "step": step}, sort_keys=True)


def _torn(line: str) -> str:
    """``line`` cut at half its length, as a run killed mid-write leaves it."""
    return line[: len(line) // 2]


@pytest.fixture
def metrics(tmp_path: Path) -> Path:
    return tmp_path / "metrics.jsonl"


def test_lines_of_steps_after_the_checkpoint_are_dropped_and_counted(metrics: Path) -> None:
    metrics.write_text("".join(_row(step) + "\n" for step in range(5)))
    assert truncate_metrics(metrics, 3) == 2
    assert metrics.read_text() == "".join(_row(step) + "\n" for step in range(3))


@pytest.mark.parametrize("newline", ["", "\n"], ids=["without-newline", "with-newline"])
def test_a_torn_last_line_is_dropped_and_counted_instead_of_failing_the_resume(metrics: Path, newline: str) -> None:
    metrics.write_text(_row(0) + "\n" + _row(1) + "\n" + _torn(_row(2)) + newline)
    assert truncate_metrics(metrics, 5) == 1
    assert metrics.read_text() == _row(0) + "\n" + _row(1) + "\n"


def test_a_torn_line_inside_the_file_is_dropped_with_the_later_steps(metrics: Path) -> None:
    lines = [_row(0), _torn(_row(1)), _row(1), _row(2), "", _row(3)]
    metrics.write_text("\n".join(lines) + "\n")
    assert truncate_metrics(metrics, 2) == 4  # the torn line, the blank one, steps 2 and 3
    assert metrics.read_text() == _row(0) + "\n" + _row(1) + "\n"


def test_a_row_the_resumed_run_appends_after_a_torn_line_is_read_back(metrics: Path) -> None:
    """The sink appends without looking at the file's end: the resume must leave it ending in a newline."""
    metrics.write_text(_row(0) + "\n" + _row(1) + "\n" + _torn(_row(2)))
    truncate_metrics(metrics, 2)
    JsonlSink(metrics.parent).write(2, {"reward/mean": 0.75})
    assert load_metrics(metrics) == [json.loads(_row(0)), json.loads(_row(1)), {"reward/mean": 0.75, "step": 2}]


def test_the_rewrite_goes_through_an_fsynced_file_in_the_same_directory_moved_into_place(
    metrics: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics.write_text(_row(0) + "\n" + _torn(_row(1)))
    calls: list[tuple] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append(("fsync", Path(os.readlink(f"/proc/self/fd/{fd}"))))
        real_fsync(fd)

    def replace(src, dst) -> None:
        calls.append(("replace", Path(src), Path(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    truncate_metrics(metrics, 5)
    (_, tmp, target) = next(call for call in calls if call[0] == "replace")
    assert target == metrics and tmp.parent == metrics.parent and tmp != metrics
    assert calls == [("fsync", tmp), ("replace", tmp, metrics), ("fsync", metrics.parent)]
    assert sorted(p.name for p in metrics.parent.iterdir()) == [metrics.name]


def test_a_crash_during_the_rewrite_leaves_the_old_file_whole(metrics: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = _row(0) + "\n" + _row(1) + "\n" + _row(2) + "\n"
    metrics.write_text(old)

    def killed(src, dst) -> None:
        raise KeyboardInterrupt  # the process stops before the new file is moved into place

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        truncate_metrics(metrics, 1)
    assert metrics.read_text() == old
    assert sorted(p.name for p in metrics.parent.iterdir()) == [metrics.name]


def test_a_file_with_nothing_to_drop_is_left_as_it_is(metrics: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    metrics.write_text(_row(0) + "\n" + _row(1) + "\n")
    monkeypatch.setattr(os, "replace", lambda src, dst: pytest.fail("rewrote a file with nothing to drop"))
    assert truncate_metrics(metrics, 2) == 0
    assert truncate_metrics(metrics.with_name("absent.jsonl"), 2) == 0
