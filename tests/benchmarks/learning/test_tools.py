"""benchmarks.learning.tools's bookkeeping: tool-use figures and the report (the runs themselves are the benchmark)."""

from __future__ import annotations

import argparse

from benchmarks.learning.relay_vs_trl import compare, held_out
from benchmarks.learning.tools import report, tool_use
from relay.evaluation import wilson_interval


def _metrics(accuracy: float, fmt: float, calls: float | None) -> dict[str, float]:
    low, high = wilson_interval(round(accuracy * 200), 200)
    out = {
        "val/accuracy_greedy": accuracy,
        "val/accuracy_greedy_ci_low": low,
        "val/accuracy_greedy_ci_high": high,
        "val/format_rate_greedy": fmt,
        "val/truncated_frac_greedy": 0.1,
        "val/greedy_length_mean": 60.0,
        "val/problems": 200.0,
    }
    if calls is not None:
        out |= {"val/tool_call_rate_greedy": calls, "val/correct_with_tool_share_greedy": calls / 2}
    return out


def test_report_has_a_row_per_model_and_the_differences() -> None:
    entries = {
        "base_tools": (_metrics(0.01, 0.3, 0.05), 0.0),
        "base_learn": (_metrics(0.01, 0.25, None), 0.0),
        "trained_tools": (_metrics(0.06, 0.9, 0.7), 40.0),
        "trained_learn": (_metrics(0.02, 0.99, None), 40.0),
    }
    held = {name: {**held_out(name, m, minutes), **tool_use(m)} for name, (m, minutes) in entries.items()}
    assert held["base_learn"]["tool_call_rate"] == 0.0 and held["trained_tools"]["correct_with_tool_share"] == 0.35
    results = {
        "budget_minutes": 40,
        "problems": 200,
        "machine": "x86_64, 2 cores, no GPU",
        "date": "2026-11-25",
        "held_out": held,
        "trainers": {"tools": {"steps": 30}, "learn": {"steps": 45}},
        "tools_minus_learn": {k: compare(held["trained_tools"], held["trained_learn"], k) for k in ("accuracy",)},
    }
    text = report(argparse.Namespace(), results)
    rows = [ln for ln in text.splitlines() if ln.startswith("| base") or ln.startswith("| trained")]
    assert len(rows) == 4 and "| trained | tools | 40.0 | 30 | 0.060" in text and "| 0.700 | 0.350 |" in text
    assert "Tools − learn, held-out accuracy: +0.040" in text and "--minutes 40" in text
