"""The GSM8K learning curve with LoRA next to full fine-tuning: two ``benchmarks.learning.relay_vs_trl`` output
directories (each with ``relay/metrics.jsonl``, ``eval_base.json`` and ``eval_relay.json``) compared in one table
and two plots.

    python -m benchmarks.learning.relay_vs_trl --config configs/gsm8k_smollm2_learn.yaml --skip-trl \
        --out outputs/learning
    python -m benchmarks.learning.relay_vs_trl --config configs/gsm8k_smollm2_learn_lora.yaml --skip-trl \
        --out outputs/lora
    python -m benchmarks.learning.lora --full outputs/learning --lora outputs/lora

Writes ``docs/learning_lora_reward.png``, ``docs/learning_lora_heldout.png`` and
``benchmarks/results/lora_learning.json``, and prints the Markdown table (BENCHMARKS.md, "LoRA vs full fine-tuning
on GSM8K").
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.learning.relay_vs_trl import held_out, trainer_summary
from relay.metrics import outcomes as om
from relay.metrics import policy as pm
from relay.metrics import system as sm
from relay.repo import REPO_ROOT


def summarize(out: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One arm's held-out result and training summary, and its metric rows."""
    from relay.run.summarize import load_metrics

    rows = load_metrics(out / "relay" / "metrics.jsonl")
    minutes = rows[-1][sm.TIME_ELAPSED] / 60
    base = held_out("base", json.loads((out / "eval_base.json").read_text()), 0.0)
    final = held_out("relay", json.loads((out / "eval_relay.json").read_text()), minutes)
    summary = trainer_summary(rows, final, base)
    kl = [float(r[pm.ACTOR_KL]) for r in rows if r.get(pm.ACTOR_KL) is not None]
    steps = [float(r[sm.TIMING_STEP]) for r in rows if r.get(sm.TIMING_STEP) is not None]
    summary |= {
        "kl_last10": sum(kl[-10:]) / max(len(kl[-10:]), 1),
        "step_seconds_median": sorted(steps)[len(steps) // 2] if steps else float("nan"),
        "sync_bytes": float(rows[-1].get(sm.SYNC_BYTES, float("nan"))),
        "learner_peak_gib": max(float(r.get(sm.MEMORY_PEAK_RSS.format(role="learner"), 0.0)) for r in rows),
    }
    return {"base": base, "final": final, "summary": summary}, rows


def table(arms: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| arm | steps | s/step | reward first 10 → last 10 | KL last 10 | held-out accuracy [95% CI] | format rate "
        "| truncated | mean length | sync MB | learner peak GiB |",
        "|---|---:|---:|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    base = next(iter(arms.values()))["base"]
    lines.append(
        f"| base | 0 | - | - | - | {base['accuracy']:.3f} [{base['accuracy_ci'][0]:.3f}, {base['accuracy_ci'][1]:.3f}] "
        f"| {base['format_rate']:.3f} | {base['truncated']:.2f} | {base['length_mean']:.0f} | - | - |"
    )
    for name, arm in arms.items():
        e, s = arm["final"], arm["summary"]
        lines.append(
            f"| {name} | {s['steps']} | {s['step_seconds_median']:.1f} | {s['reward_first10']:.3f} → "
            f"{s['reward_last10']:.3f} | {s['kl_last10']:.3f} | {e['accuracy']:.3f} [{e['accuracy_ci'][0]:.3f}, "
            f"{e['accuracy_ci'][1]:.3f}] | {e['format_rate']:.3f} | {e['truncated']:.2f} | {e['length_mean']:.0f} | "
            f"{s['sync_bytes'] / 1e6:.0f} | {s['learner_peak_gib']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.learning.lora", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--full", type=Path, required=True, help="benchmarks.learning.relay_vs_trl OUT of the full fine-tuning run"
    )
    parser.add_argument("--lora", type=Path, required=True, help="benchmarks.learning.relay_vs_trl OUT of the LoRA run")
    parser.add_argument("--docs", type=Path, default=REPO_ROOT / "docs")
    args = parser.parse_args(argv)
    from benchmarks.learning.wall_clock import HeldOut, held_out_plot, training_curve_plot, wall_clock_series

    arms, runs = {}, {}
    for name, out in (("full fine-tuning", args.full), ("LoRA rank 16", args.lora)):
        arms[name], runs[name] = summarize(out)
    curves = {name: wall_clock_series(rows, om.REWARD_MEAN) for name, rows in runs.items()}
    training_curve_plot(args.docs / "learning_lora_reward.png", "Training reward, GSM8K", om.REWARD_MEAN, curves)
    points: dict[str, list[HeldOut]] = {}
    for name, arm in arms.items():
        base, final = arm["base"], arm["final"]
        for key in ("accuracy", "format_rate"):
            ci = final[f"{key}_ci"] if key == "accuracy" else arm["summary"]["format_rate_ci"]
            start = base["accuracy_ci"] if key == "accuracy" else [base["format_rate"]] * 2
            points[f"{name}: {key.replace('_', ' ')}"] = [
                HeldOut(0.0, base[key], *start),
                HeldOut(final["minutes"], final[key], *ci),
            ]
    held_out_plot(args.docs / "learning_lora_heldout.png", "Held-out GSM8K test (greedy)", "rate", points)
    (REPO_ROOT / "benchmarks" / "results" / "lora_learning.json").write_text(json.dumps(arms, indent=1))
    print(table(arms))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
