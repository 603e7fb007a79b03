"""benchmarks.learning.curve: reading a curve between its points, the race's verdict, and the checkpoints of a
Relay run directory and of a TRL output as the benchmark finds them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.learning.curve import (
    CurvePoint,
    minutes_to_reach,
    race_verdict,
    relay_checkpoints,
    trl_checkpoints,
    value_at,
)


def _point(step: int, minutes: float, lenient: float, strict: float | None = None) -> CurvePoint:
    strict = lenient if strict is None else strict
    return CurvePoint(step, minutes, strict, (0.0, 1.0), lenient, (0.0, 1.0), 1.0, 200)


RELAY = [_point(0, 0.0, 0.50), _point(8, 6.0, 0.70), _point(16, 12.0, 0.86)]
TRL = [_point(0, 0.0, 0.50), _point(5, 9.0, 0.62), _point(17, 30.0, 0.75)]


def test_value_at_reads_between_points_and_holds_the_ends() -> None:
    assert value_at(RELAY, 9.0, "lenient") == pytest.approx(0.78)
    assert value_at(RELAY, 6.0, "lenient") == pytest.approx(0.70)
    assert value_at(RELAY, 30.0, "lenient") == pytest.approx(0.86)  # after the last point: its value


def test_minutes_to_reach_interpolates_the_crossing() -> None:
    assert minutes_to_reach(RELAY, 0.75, "lenient") == pytest.approx(6 + 6 * 0.05 / 0.16)
    assert minutes_to_reach(RELAY, 0.50, "lenient") == 0.0
    assert minutes_to_reach(TRL, 0.9, "lenient") is None


def test_race_verdict_is_the_module_docstrings_worked_example() -> None:
    verdict = race_verdict(RELAY, TRL, "lenient")
    assert [d["minutes"] for d in verdict["differences"]] == [9.0, 30.0]  # TRL's checkpoints, not its base point
    assert [d["difference"] for d in verdict["differences"]] == pytest.approx([0.16, 0.11])
    assert verdict["ahead_everywhere"]
    assert verdict["share_of_their_minutes"] == pytest.approx((6 + 6 * 0.05 / 0.16) / 30)
    nearest = verdict["differences"][0]["nearest"]  # Relay's 6-minute checkpoint against TRL's 9-minute one
    assert nearest["minutes"] == 6.0 and nearest["difference"] == pytest.approx(0.08)
    assert nearest["low"] < 0 < nearest["high"]  # 0.70 vs 0.62 on 200 problems each: within noise
    behind = race_verdict(TRL, RELAY, "lenient")
    assert not behind["ahead_everywhere"] and behind["minutes_to_their_final"] is None
    assert behind["their_final_above_start"]


def test_a_final_no_higher_than_the_start_leaves_nothing_to_reach() -> None:
    fell = [_point(0, 0.0, 0.045), _point(8, 4.5, 0.015), _point(56, 29.8, 0.0)]  # the chain-sum direct arm
    verdict = race_verdict(RELAY, fell, "lenient")
    assert not verdict["their_final_above_start"] and verdict["minutes_to_their_final"] is None


def test_relay_checkpoints_are_placed_at_their_last_steps_minutes(tmp_path: Path) -> None:
    rows = [{"step": s, "time/elapsed_s": 40.0 * (s + 1)} for s in range(6)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for step in (3, 6):
        (tmp_path / "checkpoints" / f"step_{step:06d}").mkdir(parents=True)
    got = relay_checkpoints(tmp_path)
    assert [(c.step, c.minutes, c.path.name) for c in got] == [(3, 2.0, "step_000003"), (6, 4.0, "step_000006")]


def test_trl_checkpoints_end_with_the_final_policy(tmp_path: Path) -> None:
    saved = {"step": 4, "minutes": 5.5, "path": str(tmp_path / "checkpoints" / "step_000004")}
    (tmp_path / "checkpoints.jsonl").write_text(json.dumps(saved) + "\n")
    (tmp_path / "summary.json").write_text(json.dumps({"steps": 9, "train_seconds": 900.0}))
    got = trl_checkpoints(tmp_path)
    assert [(c.step, c.minutes, c.path.name) for c in got] == [(4, 5.5, "step_000004"), (9, 15.0, "final")]
