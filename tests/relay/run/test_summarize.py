"""The run summary: a Markdown table per step, events, and valid PNG plots; missing metrics never crash."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from relay.repo import REPO_ROOT
from relay.run.events import EventLog
from relay.run.sinks import JsonlSink
from relay.run.summarize import load_metrics, main, markdown_table

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ALL_PLOTS = ["accuracy.png", "kl.png", "response_length.png", "reward.png", "step_time_breakdown.png"]


def step_metrics(step: int) -> dict[str, float]:
    return {
        "reward/mean": 0.1 * step,
        "reward/std": 0.05,
        "reward/accuracy": 0.05 * step,
        "actor/kl": 0.001 * step,
        "response/length_mean": 100.0 + step,
        "timing/step": 20.0 + step,
        "timing/rollout": 10.0,
        "timing/actor_ref_and_reward": 4.0,
        "timing/update": 3.0,
        "timing/sync": 0.5,
    }


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "default-20250101-120000"
    sink, events = JsonlSink(run), EventLog(run)
    events.write("start", run_name=run.name)
    for step in range(4):
        sink.write(step, step_metrics(step))
    events.write("checkpoint", step=3, path="checkpoints/step_3")
    events.write("finish", steps=4)
    return run


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, path
    length, chunk = struct.unpack(">I4s", data[8:16])
    width, height = struct.unpack(">II", data[16:24])
    assert chunk == b"IHDR" and length == 13 and width > 100 and height > 100
    assert data[-12:] == b"\x00\x00\x00\x00IEND\xaeB`\x82"


def test_table_events_and_plots(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(run_dir)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| step |"))
    assert lines[header] == (
        "| step | reward | acc | kl | resp_len | t_step (s) | t_rollout | t_ref+reward | t_update | t_sync |"
    )
    assert lines[header + 2] == "| 0 | 0.000 | 0.000 | 0.00000 | 100.0 | 20.0 | 10.0 | 4.0 | 3.0 | 0.50 |"
    assert lines[header + 5] == "| 3 | 0.300 | 0.150 | 0.00300 | 103.0 | 23.0 | 10.0 | 4.0 | 3.0 | 0.50 |"
    assert "| rollout | 40.0 | 47% |" in out and "| other | 16.0 | 19% |" in out
    assert "**checkpoint** step=3 path=checkpoints/step_3" in out and "**finish** steps=4" in out
    plots = run_dir / "plots"
    assert sorted(p.name for p in plots.iterdir()) == ALL_PLOTS
    for path in plots.iterdir():
        assert_png(path)
        assert str(path) in out


def test_missing_metrics_show_dash_and_skip_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    sink = JsonlSink(run)
    sink.write(0, {"reward/mean": 0.5, "timing/step": 9.0})  # no accuracy, KL, length, phases
    sink.write(1, {"reward/mean": float("nan"), "timing/step": 8.0})
    out_dir = tmp_path / "elsewhere"
    assert main([str(run), "--out", str(out_dir)]) == 0
    out = capsys.readouterr().out
    assert "| 0 | 0.500 | - | - | - | 9.0 | - | - | - | - |" in out
    assert "| 1 | nan | - | - | - | 8.0 | - | - | - | - |" in out
    assert "kl.png skipped: no actor/kl in metrics.jsonl" in out
    assert sorted(p.name for p in out_dir.iterdir()) == ["reward.png", "step_time_breakdown.png"]
    assert not (run / "plots").exists()
    for path in out_dir.iterdir():
        assert_png(path)


def test_empty_or_missing_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nope")]) == 2
    assert "metrics.jsonl not found" in capsys.readouterr().err
    (tmp_path / "metrics.jsonl").write_text("")
    assert main([str(tmp_path)]) == 0
    assert "no steps in metrics.jsonl: no plots" in capsys.readouterr().out


def test_load_metrics_dedupes_resumed_steps_and_skips_torn_lines(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    rows = [{"step": 0, "x": 1}, {"step": 1, "x": 2}, {"step": 1, "x": 3}, {"step": 2, "x": 4}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 3, "x"')
    assert load_metrics(path) == [{"step": 0, "x": 1}, {"step": 1, "x": 3}, {"step": 2, "x": 4}]


def _row(step: int, x: float) -> str:
    return json.dumps({"step": step, "x": x}, sort_keys=True)


def _torn(line: str) -> str:
    """``line`` cut at half its length, as a run killed mid-write leaves it."""
    return line[: len(line) // 2]


@pytest.mark.parametrize("newline", ["", "\n"], ids=["without-newline", "with-newline"])
def test_load_metrics_skips_a_last_line_torn_half_way(tmp_path: Path, newline: str) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text(_row(0, 1) + "\n" + _row(1, 2) + "\n" + _torn(_row(2, 3)) + newline)
    assert load_metrics(path) == [{"step": 0, "x": 1}, {"step": 1, "x": 2}]


def test_load_metrics_keeps_the_rows_a_resumed_run_appended_after_a_torn_line(tmp_path: Path) -> None:
    """Killed while writing step 2 and resumed at step 1: every row after the torn line counts, a redone step's
    last row wins."""
    path = tmp_path / "metrics.jsonl"
    lines = [_row(0, 1), _row(1, 2), _torn(_row(2, 3)), _row(1, 4), _row(2, 5), _row(3, 6)]
    path.write_text("\n".join(lines) + "\n")
    assert load_metrics(path) == [{"step": 0, "x": 1}, {"step": 1, "x": 4}, {"step": 2, "x": 5}, {"step": 3, "x": 6}]


def test_markdown_table_keeps_odd_values() -> None:
    table = markdown_table([{"step": 0, "reward/mean": "n/a", "reward/accuracy": None}])
    assert table.splitlines()[2] == "| 0 | n/a | - | - | - | - | - | - | - | - |"


def test_module_entry_point(run_dir: Path, tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "relay.run.summarize", str(run_dir), "--out", str(tmp_path / "p")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "| step | reward |" in out.stdout and "RuntimeWarning" not in out.stderr
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == ALL_PLOTS
