"""A run's held-out accuracy against wall-clock minutes: strict and lenient, with 95% intervals, from the base model on.

    python -m benchmarks.learning.held_out_curve RUN_DIR [--base BASE.json] [--final FINAL.json] [--png PATH]
        [--title TEXT]

Reads the ``val/*`` rows of ``RUN_DIR/metrics.jsonl`` (each validation during training, on the run's clock
``time/elapsed_s``), the base model's evaluation (``--base``: ``driver.evaluate``'s JSON line on the same split, drawn
at minute 0) and optionally the final checkpoint's (``--final``, drawn at the run's last minute), and prints a
Markdown table (minute, step, strict and lenient greedy accuracy with their intervals, format rate) and, with
``--png``, the plot of both accuracies.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.learning.wall_clock import ELAPSED, HeldOut, held_out_plot
from relay.metrics import system as sm
from relay.metrics import validation as vm
from relay.run.summarize import load_metrics

ACCURACIES = {"strict": vm.VAL_ACCURACY, "lenient": vm.VAL_LENIENT_ACCURACY}


def points(run_dir: Path, base: dict[str, float] | None, final: dict[str, float] | None) -> list[dict[str, Any]]:
    """The held-out evaluations in time order: ``{"minutes", "step", "metrics"}``; the base at minute 0 (step 0)
    and the final evaluation at the last validation's minute (or the last step's)."""
    rows = load_metrics(run_dir / "metrics.jsonl")
    found = [
        {"minutes": r[ELAPSED] / 60, "step": int(r[sm.STEP]) + 1, "metrics": r}
        for r in rows
        if ACCURACIES["strict"] in r and ELAPSED in r
    ]
    if base is not None:
        found.insert(0, {"minutes": 0.0, "step": 0, "metrics": base})
    if final is not None:
        last = max((float(r[ELAPSED]) for r in rows if ELAPSED in r), default=0.0) / 60
        found.append({"minutes": last, "step": int(rows[-1][sm.STEP]) + 1 if rows else 0, "metrics": final})
    return found


def table(evaluations: list[dict[str, Any]]) -> str:
    """One row per evaluation: minute, step, strict and lenient greedy accuracy [95% CI], format rate, problems."""
    lines = [
        "| minute | step | strict greedy [95% CI] | lenient greedy [95% CI] | format (greedy) | problems |",
        "|---:|---:|---|---|---:|---:|",
    ]
    for e in evaluations:
        m = e["metrics"]
        cells = [f"{e['minutes']:.1f}", str(e["step"])]
        cells += [_with_interval(m, key) for key in ACCURACIES.values()]
        cells += [f"{m.get(vm.VAL_FORMAT_RATE, float('nan')):.2f}", f"{m[vm.VAL_PROBLEMS]:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _with_interval(m: dict[str, float], key: str) -> str:
    if key not in m:
        return "-"
    return f"{m[key]:.3f} [{m[key + '_ci_low']:.3f}, {m[key + '_ci_high']:.3f}]"


def plot(evaluations: list[dict[str, Any]], path: Path, title: str) -> Path:
    """Strict and lenient greedy accuracy against minutes, with their intervals."""
    series = {}
    for name, key in ACCURACIES.items():
        series[f"{name} accuracy"] = [
            HeldOut(e["minutes"], e["metrics"][key], e["metrics"][key + "_ci_low"], e["metrics"][key + "_ci_high"])
            for e in evaluations
            if key in e["metrics"]
        ]
    return held_out_plot(path, title, "held-out accuracy (greedy)", series)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--base", type=Path, default=None, help="driver.evaluate's JSON line for the base model")
    parser.add_argument("--final", type=Path, default=None, help="driver.evaluate's JSON line for the final model")
    parser.add_argument("--png", type=Path, default=None, help="write the plot here")
    parser.add_argument("--title", default="Held-out accuracy during training")
    args = parser.parse_args(argv)
    base = json.loads(args.base.read_text()) if args.base else None
    final = json.loads(args.final.read_text()) if args.final else None
    evaluations = points(args.run_dir, base, final)
    if not evaluations:
        print(f"error: {args.run_dir / 'metrics.jsonl'} has no validation rows", file=sys.stderr)
        return 2
    print(table(evaluations))
    if args.png is not None:
        print(f"plot: {plot(evaluations, args.png, args.title)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
