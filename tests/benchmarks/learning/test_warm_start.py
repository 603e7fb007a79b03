"""benchmarks.learning.warm_start's bookkeeping: each arm's figures, the runs' summaries, the report and the plot (the
runs themselves are the benchmark)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.learning.warm_start import ARMS, collect, plot, report, run_summary
from relay.evaluation import wilson_interval


def _metrics(correct: int, calls: float | None = None, parse: float | None = None) -> dict[str, float]:
    low, high = wilson_interval(correct, 200)
    out = {
        "val/accuracy_greedy": correct / 200,
        "val/accuracy_greedy_ci_low": low,
        "val/accuracy_greedy_ci_high": high,
        "val/format_rate_greedy": 0.9,
        "val/truncated_frac_greedy": 0.05,
        "val/problems": 200.0,
    }
    if calls is not None:
        out |= {"val/tool_call_rate_greedy": calls, "val/tool_calls_per_response_greedy": 3 * calls}
    if parse is not None:
        out["val/tool_call_parse_rate_greedy"] = parse
    return out


def _run(path: Path, curve: str, values: list[float], val_loss: float | None = None, batch: int = 16) -> Path:
    path.mkdir()
    (path / "config.yaml").write_text(f"rollout:\n  batch_size: {batch}\n  n: 1\n")
    rows = [{"step": i, curve: v, "time/elapsed_s": 60.0 * (i + 1)} for i, v in enumerate(values)]
    if val_loss is not None:
        rows[-1]["val/loss"] = val_loss
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_run_summary_reads_loss_or_reward(tmp_path: Path) -> None:
    sft = run_summary(_run(tmp_path / "sft", "actor/loss", [1.2, 1.0, 0.8, 0.6, 0.5], val_loss=0.7))
    assert (sft["curve"], sft["steps"], sft["minutes"], sft["first_fifth"], sft["last_fifth"]) == (
        "actor/loss",
        5,
        5.0,
        1.2,
        0.5,
    )
    assert sft["val_loss"] == 0.7 and sft["batch"] == 16
    grpo = run_summary(_run(tmp_path / "grpo", "reward/mean", [0.0, 0.2, 0.4, 0.2, 0.6, 0.6, 0.8, 0.8, 1.0, 1.0]))
    assert grpo["curve"] == "reward/mean" and grpo["first_fifth"] == 0.1 and grpo["last_fifth"] == 1.0


def test_report_rows_differences_and_plot(tmp_path: Path) -> None:
    evaluated = {
        "base_tools": _metrics(2, calls=0.0),
        "base_learn": _metrics(0),
        "sft_tools": _metrics(10, calls=0.9, parse=0.98),
        "grpo_tools": _metrics(24, calls=0.95, parse=0.99),
        "sft_plain": _metrics(6),
        "grpo_learn": _metrics(8),
    }
    runs = {
        name: dict(steps=steps, batch=batch, minutes=minutes, curve="actor/loss", first_fifth=1.0, last_fifth=0.5)
        for name, steps, batch, minutes in (
            ("sft_tools", 13, 16, 12.0),
            ("grpo_tools", 12, 4, 15.0),
            ("sft_plain", 24, 8, 12.0),
            ("grpo_learn", 25, 4, 15.0),
        )
    }
    args = argparse.Namespace(problems=200, sft_minutes=12.0, grpo_minutes=15.0)
    results = collect(args, evaluated, runs, {"commit": "abc1234", "minutes": 95.0})
    assert results["held_out"]["grpo_tools"]["minutes"] == 27.0 and results["held_out"]["base_tools"]["minutes"] == 0
    diff = results["differences"]["SFT → GRPO tools − base (calculator available)"]["accuracy"]
    assert abs(diff["difference"] - 0.11) < 1e-9 and not diff["within_noise"]
    text = report(results)
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| arm")]
    assert len(rows) == len(ARMS)
    assert (
        "| SFT (calculator traces) → GRPO tools | SFT 13 steps, 208 traces, 12 min + GRPO 12 steps, 15 min | "
        "0.120 [" in text
    )
    assert "| SFT (plain CoT) | SFT 24 steps, 192 traces, 12 min |" in text
    assert "| 0.95 | 2.85 | 0.99 | 0.05 |" in text and "| base, no tool | – | 0.000 [0.000, 0.019] |" in text
    assert "--sft-minutes 12 --grpo-minutes 15" in text and "95 minutes in all" in text and "`abc1234`" in text
    assert "SFT (plain CoT) − base (no tool), held-out accuracy: +0.030" in text
    assert plot(results, tmp_path / "acc.png").stat().st_size > 10_000


def test_provenance_keeps_the_first_commit_and_adds_minutes(tmp_path: Path) -> None:
    from benchmarks.learning.warm_start import PROVENANCE, provenance

    (tmp_path / PROVENANCE).write_text(json.dumps({"commit": "e26969a", "minutes": 85.0}))
    assert provenance(tmp_path) == {"commit": "e26969a", "minutes": 85.0}
    (tmp_path / "new").mkdir()
    fresh = provenance(tmp_path / "new")  # a new OUT: this checkout's commit, nothing spent yet
    assert fresh["minutes"] == 0.0 and len(fresh["commit"]) >= 7
