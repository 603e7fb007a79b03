"""Runs side by side on a wall-clock axis: training curves and held-out points of several trainers.

The x axis is ``time/elapsed_s`` (seconds since the run's first step started, written by ``trainer.py`` and by
``benchmarks.learning.trl_baseline``) in minutes, so trainers whose steps differ in length compare at equal time. Used
by ``python -m benchmarks.learning.relay_vs_trl``; the runs' rows come from :func:`relay.run.summarize.load_metrics`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relay.metrics import system as sm
from relay.run.jsonsafe import finite_number
from relay.run.summarize import _figure, _save

ELAPSED = sm.TIME_ELAPSED


@dataclass(frozen=True)
class HeldOut:
    """One held-out evaluation: its time on the run's clock, the value and its 95% interval."""

    minutes: float
    value: float
    low: float
    high: float


def wall_clock_series(rows: Sequence[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    """``(minutes, value)`` of every row that has both ``time/elapsed_s`` and ``key``.

    >>> wall_clock_series([{"time/elapsed_s": 90.0, "reward/mean": 0.5}, {"reward/mean": 0.7}], "reward/mean")
    [(1.5, 0.5)]
    """
    return [
        (t / 60.0, v)
        for r in rows
        if (t := finite_number(r.get(ELAPSED))) is not None and (v := finite_number(r.get(key))) is not None
    ]


def moving_mean(values: Sequence[float], window: int) -> list[float]:
    """The trailing mean over at most ``window`` values (shorter at the start).

    >>> moving_mean([1.0, 3.0, 5.0, 7.0], 2)
    [1.0, 2.0, 4.0, 6.0]
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    out = []
    for i in range(len(values)):
        part = values[max(0, i - window + 1) : i + 1]
        out.append(sum(part) / len(part))
    return out


def first_last_means(values: Sequence[float], count: int = 10) -> tuple[float, float]:
    """The mean of the first ``count`` and of the last ``count`` values (they overlap under 2 x count).

    >>> first_last_means([0.0, 0.0, 1.0, 1.0], 2)
    (0.0, 1.0)
    """
    if not values:
        raise ValueError("first_last_means: no values")
    first, last = values[:count], values[-count:]
    return sum(first) / len(first), sum(last) / len(last)


def training_curve_plot(
    path: Path, title: str, ylabel: str, curves: Mapping[str, Sequence[tuple[float, float]]], window: int = 5
) -> Path:
    """Each run's per-step values as faint points and their ``window``-step trailing mean as a line."""
    fig, ax = _figure(title, "wall-clock minutes (training)", ylabel, width=8)
    for i, (label, points) in enumerate(curves.items()):
        if not points:
            continue
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        ax.plot(xs, ys, "o", color=f"C{i}", alpha=0.3, markersize=3)
        ax.plot(xs, moving_mean(ys, window), color=f"C{i}", label=f"{label} ({window}-step mean)")
    ax.legend()
    return _save(fig, path)


def held_out_plot(path: Path, title: str, ylabel: str, points: Mapping[str, Sequence[HeldOut]]) -> Path:
    """Each run's held-out evaluations joined by a line, with their 95% intervals as error bars."""
    fig, ax = _figure(title, "wall-clock minutes (training)", ylabel, width=8)
    for i, (label, evals) in enumerate(points.items()):
        evals = sorted(evals, key=lambda e: e.minutes)
        xs = [e.minutes for e in evals]
        ys = [e.value for e in evals]
        below = [max(0.0, e.value - e.low) for e in evals]
        above = [max(0.0, e.high - e.value) for e in evals]
        ax.errorbar(xs, ys, yerr=[below, above], marker="o", capsize=4, color=f"C{i}", label=label)
    ax.set_ylim(bottom=0.0)
    ax.legend()
    return _save(fig, path)
