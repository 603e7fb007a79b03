"""Held-out accuracy against training minutes: each trainer's checkpoints, their evaluations, and the race's verdict.

A curve is a list of :class:`CurvePoint` (the base model at minute 0, then one per checkpoint at the training
minutes it was saved after), each point the greedy strict and lenient accuracy of ``python -m driver.evaluate`` on
the same held-out problems. Two curves are compared at the second one's points: the first one's accuracy there is
read by linear interpolation between its own points (:func:`value_at`).

Worked example: Relay's lenient points (0, 0.50), (6, 0.70), (12, 0.86) and TRL's (0, 0.50), (9, 0.62), (30, 0.75):
at TRL's 9 minutes Relay reads 0.70 + (0.86 - 0.70) * 3/6 = 0.78, ahead by 0.16; Relay first reaches TRL's final
0.75 at 6 + 6 * (0.75 - 0.70) / (0.86 - 0.70) = 7.9 minutes, 0.26 of TRL's 30.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.learning.wall_clock import HeldOut, held_out_plot
from relay.metrics import system as sm
from relay.metrics import validation as vm

READINGS = ("strict", "lenient")  # held-out greedy accuracy where the prompt asked for it / the last number read


@dataclass(frozen=True)
class Checkpoint:
    """A saved policy: after ``step`` optimizer steps, ``minutes`` of training."""

    step: int
    minutes: float
    path: Path


@dataclass(frozen=True)
class CurvePoint:
    """One evaluation of a checkpoint on the held-out problems (rates in [0, 1], Wilson 95% intervals)."""

    step: int
    minutes: float
    strict: float
    strict_ci: tuple[float, float]
    lenient: float
    lenient_ci: tuple[float, float]
    format_rate: float
    problems: int

    @classmethod
    def from_metrics(cls, step: int, minutes: float, metrics: dict[str, float]) -> CurvePoint:
        """From ``driver.evaluate``'s JSON line."""
        return cls(
            step=step,
            minutes=minutes,
            strict=metrics[vm.VAL_ACCURACY],
            strict_ci=(metrics[vm.VAL_ACCURACY_CI_LOW], metrics[vm.VAL_ACCURACY_CI_HIGH]),
            lenient=metrics[vm.VAL_LENIENT_ACCURACY],
            lenient_ci=(metrics[vm.VAL_LENIENT_CI_LOW], metrics[vm.VAL_LENIENT_CI_HIGH]),
            format_rate=metrics[vm.VAL_FORMAT_RATE],
            problems=int(metrics[vm.VAL_PROBLEMS]),
        )


def relay_checkpoints(run_dir: Path) -> list[Checkpoint]:
    """A Relay run's checkpoints, each at the training minutes of its last step (``time/elapsed_s``)."""
    from relay.checkpoint.store import list_checkpoints
    from relay.run.summarize import load_metrics

    elapsed = {int(r[sm.STEP]) + 1: float(r[sm.TIME_ELAPSED]) for r in load_metrics(run_dir / "metrics.jsonl")}
    return [Checkpoint(step, elapsed[step] / 60, path) for step, path in list_checkpoints(run_dir) if step in elapsed]


def trl_checkpoints(out: Path) -> list[Checkpoint]:
    """``benchmarks.learning.trl_baseline``'s saved policies (``checkpoints.jsonl``) and its final one."""
    listed = out / "checkpoints.jsonl"
    rows = [json.loads(line) for line in listed.read_text().splitlines()] if listed.is_file() else []
    points = [Checkpoint(int(r["step"]), float(r["minutes"]), Path(r["path"])) for r in rows]
    summary = json.loads((out / "summary.json").read_text())
    if not points or points[-1].step != summary["steps"]:
        points.append(Checkpoint(int(summary["steps"]), summary["train_seconds"] / 60, out / "final"))
    return points


def value_at(curve: list[CurvePoint], minutes: float, reading: str) -> float:
    """``reading``'s accuracy of ``curve`` at ``minutes``, linear between its points (its last value after them)."""
    points = sorted(curve, key=lambda p: p.minutes)
    for before, after in zip(points, points[1:], strict=False):
        if before.minutes <= minutes <= after.minutes:
            span = after.minutes - before.minutes
            share = (minutes - before.minutes) / span if span else 1.0
            return getattr(before, reading) + share * (getattr(after, reading) - getattr(before, reading))
    return getattr(points[-1] if minutes >= points[-1].minutes else points[0], reading)


def minutes_to_reach(curve: list[CurvePoint], target: float, reading: str) -> float | None:
    """The first minute ``curve``'s interpolated ``reading`` reaches ``target`` (None: never)."""
    points = sorted(curve, key=lambda p: p.minutes)
    if getattr(points[0], reading) >= target:
        return points[0].minutes
    for before, after in zip(points, points[1:], strict=False):
        low, high = getattr(before, reading), getattr(after, reading)
        if high >= target > low:
            return before.minutes + (after.minutes - before.minutes) * (target - low) / (high - low)
    return None


def nearest_difference(ours: list[CurvePoint], point: CurvePoint, reading: str) -> dict[str, float]:
    """Our checkpoint nearest in minutes to their ``point`` (the base left out) minus it, with the 95% Newcombe
    interval of the two evaluations: whether a difference is outside noise (an interpolated value has none)."""
    from relay.evaluation import difference_interval

    mine = min((p for p in ours if p.step > 0), key=lambda p: abs(p.minutes - point.minutes))
    ours_rate, theirs_rate = getattr(mine, reading), getattr(point, reading)
    d, low, high = difference_interval(
        round(ours_rate * mine.problems), mine.problems, round(theirs_rate * point.problems), point.problems
    )
    return {"minutes": mine.minutes, "difference": d, "low": low, "high": high}


def race_verdict(ours: list[CurvePoint], theirs: list[CurvePoint], reading: str) -> dict[str, Any]:
    """Ours against theirs in ``reading``: our interpolated accuracy minus theirs at each of their checkpoints (the
    base point left out) and our nearest checkpoint's difference with its interval (:func:`nearest_difference`),
    whether ours is ahead at every one, and how long ours takes to reach their final accuracy as a share of their
    training minutes (None, with ``their_final_above_start`` False, when their final is no higher than their start:
    then there is nothing to reach)."""
    trained = [p for p in theirs if p.step > 0]
    ahead = [
        {
            "minutes": p.minutes,
            "difference": value_at(ours, p.minutes, reading) - getattr(p, reading),
            "nearest": nearest_difference(ours, p, reading),
        }
        for p in trained
    ]
    final, start = trained[-1], min(theirs, key=lambda p: p.minutes)
    gained = getattr(final, reading) > getattr(start, reading)
    reach = minutes_to_reach(ours, getattr(final, reading), reading) if gained else None
    return {
        "their_final_above_start": gained,
        "reading": reading,
        "differences": ahead,
        "ahead_everywhere": all(d["difference"] > 0 for d in ahead),
        "minutes_to_their_final": reach,
        "share_of_their_minutes": None if reach is None else reach / final.minutes,
    }


def curve_table(curves: dict[str, list[CurvePoint]]) -> list[str]:
    """Markdown rows: each arm's points with strict and lenient accuracy [95% CI] and the format rate."""
    lines = [
        "| arm | training min | step | strict [95% CI] | lenient [95% CI] | format |",
        "|---|---:|---:|---|---|---:|",
    ]
    for name, curve in curves.items():
        for p in curve:
            strict = f"{p.strict:.3f} [{p.strict_ci[0]:.3f}, {p.strict_ci[1]:.3f}]"
            lenient = f"{p.lenient:.3f} [{p.lenient_ci[0]:.3f}, {p.lenient_ci[1]:.3f}]"
            lines.append(f"| {name} | {p.minutes:.1f} | {p.step} | {strict} | {lenient} | {p.format_rate:.2f} |")
    return lines


def curve_plot(path: Path, title: str, curves: dict[str, list[CurvePoint]]) -> Path:
    """Each arm's strict and lenient held-out accuracy against training minutes, with 95% intervals."""
    points: dict[str, list[HeldOut]] = {}
    for name, curve in curves.items():
        for reading in READINGS:
            low_high = [getattr(p, f"{reading}_ci") for p in curve]
            points[f"{name}: {reading}"] = [
                HeldOut(p.minutes, getattr(p, reading), *ci) for p, ci in zip(curve, low_high, strict=True)
            ]
    return held_out_plot(path, title, "held-out accuracy (greedy)", points)


def as_json(curves: dict[str, list[CurvePoint]]) -> dict[str, list[dict[str, Any]]]:
    return {name: [asdict(p) for p in curve] for name, curve in curves.items()}
