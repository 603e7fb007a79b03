"""benchmarks.learning.relay_vs_trl's bookkeeping: summaries, the Relay-TRL comparison, the report and BENCHMARKS.md
section. The runs themselves (an hour of training per trainer) are the benchmark, not a test."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from benchmarks.harness.publish import write_section
from benchmarks.learning.curve import CurvePoint, as_json
from benchmarks.learning.relay_vs_trl import (
    arm_summary,
    compare,
    held_out,
    report,
    trainer_summary,
    verdicts,
)
from relay.repo import REPO_ROOT


def _metrics(accuracy: float, fmt: float) -> dict[str, float]:
    from relay.evaluation import wilson_interval

    low, high = wilson_interval(round(accuracy * 200), 200)
    return {
        "val/accuracy_greedy": accuracy,
        "val/accuracy_greedy_ci_low": low,
        "val/accuracy_greedy_ci_high": high,
        "val/lenient_accuracy_greedy": accuracy,
        "val/lenient_accuracy_greedy_ci_low": low,
        "val/lenient_accuracy_greedy_ci_high": high,
        "val/format_rate_greedy": fmt,
        "val/truncated_frac_greedy": 0.5,
        "val/greedy_length_mean": 100.0,
        "val/problems": 200.0,
    }


def _results() -> dict:
    base = held_out("base", _metrics(0.01, 0.2), 0.0)
    relay = held_out("relay", _metrics(0.03, 0.7), 39.0)
    trl = held_out("trl", _metrics(0.02, 0.3), 38.5)
    rows = [{"reward/mean": 0.0}] * 10 + [{"reward/mean": 0.2}] * 10
    return {
        "budget_minutes": 40,
        "problems": 200,
        "max_new_tokens": 128,
        "machine": "x86_64, 2 cores, no GPU",
        "date": "2026-11-23",
        "held_out": {"base": base, "relay": relay, "trl": trl},
        "trainers": {"relay": trainer_summary(rows, relay, base), "trl": trainer_summary(rows[:12], trl, base)},
        "relay_minus_trl": {key: compare(relay, trl, key) for key in ("accuracy", "format_rate")},
    }


def test_summary_and_comparison() -> None:
    results = _results()
    relay = results["trainers"]["relay"]
    assert (relay["steps"], relay["reward_first10"], relay["reward_last10"]) == pytest.approx((20, 0.0, 0.2))
    assert relay["format_ratio_vs_base"] == pytest.approx(3.5)
    assert relay["accuracy_minus_base"] == pytest.approx(0.02)
    trl = results["trainers"]["trl"]
    assert trl["reward_last10"] == pytest.approx(0.04)  # 8 zeros and 2 x 0.2 in the last 10 of 12
    accuracy, fmt = results["relay_minus_trl"]["accuracy"], results["relay_minus_trl"]["format_rate"]
    assert accuracy["difference"] == pytest.approx(0.01) and accuracy["within_noise"]
    assert fmt["difference"] == pytest.approx(0.4) and not fmt["within_noise"] and fmt["low"] > 0.3


def _curve(points: list[tuple[float, float]]) -> list[CurvePoint]:
    return [CurvePoint.from_metrics(i * 8, minutes, _metrics(acc, 1.0)) for i, (minutes, acc) in enumerate(points)]


def test_report_and_the_benchmarks_md_section(tmp_path: Path) -> None:
    curves = {
        "relay": _curve([(0.0, 0.5), (6.0, 0.7), (12.0, 0.86)]),
        "trl": _curve([(0.0, 0.5), (9.0, 0.62), (30.0, 0.75)]),
    }
    results = {
        "budget_minutes": 30.0,
        "problems": 200,
        "max_new_tokens": 64,
        "machine": "x86_64, 2 cores, no GPU",
        "date": "2026-11-28",
        "curves": as_json(curves),
        "arms": {"relay": arm_summary([{"reward/mean": 0.5}] * 3), "trl": arm_summary([{"reward/mean": 0.2}] * 2)},
        "verdicts": verdicts(curves),
    }
    args = argparse.Namespace(config=REPO_ROOT / "configs" / "arithmetic_smollm2.yaml")
    section = report(args, results, "docs/learning_arithmetic_smollm2.png")
    assert (
        "`python -m benchmarks.learning.relay_vs_trl --config configs/arithmetic_smollm2.yaml --minutes 30`" in section
    )
    assert "| relay | 6.0 | 8 | 0.700 [0.633, 0.759] | 0.700 [0.633, 0.759] | 1.00 |" in section
    assert "| trl | 2 | 0.200 → 0.200 |" in section
    # the module docstring's worked example: Relay 0.78 at TRL's 9 minutes, TRL's final 0.75 at 7.9 minutes
    assert "Relay − TRL, lenient: 9.0 min +0.160 (checkpoints 6.0 min: +0.080 [" in section
    assert "30.0 min +0.110 (checkpoints 12.0 min: +0.110 [" in section and "ahead at every checkpoint" in section
    assert "final lenient accuracy at 7.9 min (0.26 of its minutes)." in section
    bench = tmp_path / "BENCHMARKS.md"
    bench.write_text("# Benchmarks\n\nearlier text\n")
    marks = ("<!-- learning:x:begin -->", "<!-- learning:x:end -->")
    write_section(bench, "first", marks, "A race")
    write_section(bench, "second", marks, "A race")  # replaces the marked block, keeps the rest
    text = bench.read_text()
    assert text.count(marks[0]) == 1 and "second" in text and "first" not in text and "earlier text" in text
    assert text.index("## A race") < text.index(marks[0]) < text.index("second") < text.index(marks[1])
