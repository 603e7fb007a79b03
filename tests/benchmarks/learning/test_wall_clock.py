"""Wall-clock series, the moving mean, first/last means and the two comparison plots."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.learning.wall_clock import (
    HeldOut,
    first_last_means,
    held_out_plot,
    moving_mean,
    training_curve_plot,
    wall_clock_series,
)


def test_series_in_minutes_skips_rows_without_time_or_value() -> None:
    rows = [
        {"time/elapsed_s": 30.0, "reward/mean": 0.1},
        {"time/elapsed_s": 90.0},
        {"reward/mean": 0.3},
        {"time/elapsed_s": 120.0, "reward/mean": float("nan")},
        {"time/elapsed_s": 180.0, "reward/mean": 0.4},
    ]
    assert wall_clock_series(rows, "reward/mean") == [(0.5, 0.1), (3.0, 0.4)]


def test_moving_mean_and_first_last_means_golden() -> None:
    assert moving_mean([1.0, 3.0, 5.0, 7.0], 3) == [1.0, 2.0, 3.0, 5.0]
    assert moving_mean([2.0], 5) == [2.0]
    with pytest.raises(ValueError, match="window must be >= 1"):
        moving_mean([1.0], 0)
    assert first_last_means([0.0] * 10 + [1.0] * 10, 10) == (0.0, 1.0)
    assert first_last_means([0.0, 1.0, 2.0], 10) == (1.0, 1.0)  # fewer than 10: both are the whole run
    with pytest.raises(ValueError, match="no values"):
        first_last_means([])


def test_plots_are_written(tmp_path: Path) -> None:
    curve = training_curve_plot(
        tmp_path / "r.png", "reward", "reward/mean", {"relay": [(0.5, 0.1), (1.0, 0.2)], "trl": [(2.0, 0.1)]}
    )
    held = held_out_plot(
        tmp_path / "h.png",
        "held-out",
        "rate",
        {"relay": [HeldOut(30.0, 0.05, 0.02, 0.09), HeldOut(0.0, 0.01, 0.0, 0.04)]},
    )
    for path in (curve, held):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
