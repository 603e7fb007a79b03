"""Dynamic sampling on and off, side by side: the default job on GSM8K with and without
``algorithm.filter_groups``, the same seeds and steps, one after the other in one invocation.

    python -m benchmarks.dynamic_sampling [--steps 5] [--set key=value ...]

Reports per arm: seconds per step, the share of sampled groups with reward variance (the ones that carry a
gradient), such groups trained per step and per wall-clock minute, the policy's sampled reward, and the
extra rollout passes. Writes ``benchmarks/results/dynamic_sampling.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULT = REPO / "benchmarks" / "results" / "dynamic_sampling.json"


def arm_overrides(filter_on: bool, steps: int, out_dir: Path, extra: list[str]) -> list[str]:
    return [
        f"algorithm.filter_groups.enable={str(filter_on).lower()}",
        f"trainer.total_training_steps={steps}",
        f"trainer.output_dir={out_dir}",
        f"trainer.run_name={'filter_on' if filter_on else 'filter_off'}",
        "trainer.save_freq=-1",
        "trainer.test_freq=-1",
        *extra,
    ]


def summarize_arm(rows: list[dict[str, Any]], wall_s: float) -> dict[str, float]:
    """The arm's figures from its ``metrics.jsonl`` rows (every step, the compiling first one included)."""
    steps = len(rows)
    filtered = "filter/prompts_sampled" in rows[0]
    if filtered:
        sampled = sum(r["filter/prompts_sampled"] for r in rows)
        signal = sum(r["filter/groups_kept"] + r["filter/groups_surplus"] for r in rows)
        trained_signal = sum(r["filter/groups_kept"] for r in rows)
    else:
        groups = [r["batch/sequences"] / r["rollout_n"] for r in rows]
        sampled = sum(groups)
        signal = sum(g * (1 - r["advantage/zero_groups_frac"]) for g, r in zip(groups, rows, strict=True))
        trained_signal = signal
    step_s = [r["timing/step"] for r in rows]
    return {
        "steps": steps,
        "wall_s": wall_s,
        "step_s_median": statistics.median(step_s),
        "step_s_total": sum(step_s),
        "prompts_sampled": sampled,
        "signal_share_of_sampled": signal / sampled,
        "signal_groups_trained": trained_signal,
        "signal_groups_per_step": trained_signal / steps,
        "signal_groups_per_minute": trained_signal / (sum(step_s) / 60),
        "sampled_reward_mean": statistics.fmean(r["reward/mean"] for r in rows),
        "extra_passes_mean": statistics.fmean(r.get("filter/extra_passes", 0.0) for r in rows),
        "rollout_s_median": statistics.median(r["timing/rollout"] for r in rows),
        "update_s_median": statistics.median(r["timing/update"] for r in rows),
    }


def run_arm(filter_on: bool, steps: int, work: Path, extra: list[str]) -> dict[str, float]:
    from relay.config import load_config
    from relay.models.paths import resolve_model_path
    from trainer import train

    loaded = load_config(REPO / "configs" / "default.yaml", arm_overrides(filter_on, steps, work, extra), environ={})
    run_dir = work / ("filter_on" if filter_on else "filter_off")
    start = time.perf_counter()
    code = train(loaded, resolve_model_path(loaded.cfg.model.path), run_dir)
    wall = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"arm filter={filter_on} failed with exit code {code}; see {run_dir}")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    for r in rows:
        r["rollout_n"] = loaded.cfg.rollout.n
    return {**summarize_arm(rows, wall), "per_step": rows}


def table(result: dict[str, Any]) -> str:
    off, on = result["filter_off"], result["filter_on"]
    lines = [
        "| | filter off | filter on | on / off |",
        "|---|---:|---:|---:|",
    ]
    for label, key, fmt in (
        ("s/step (median)", "step_s_median", "{:.1f}"),
        ("rollout s/step (median)", "rollout_s_median", "{:.1f}"),
        ("update s/step (median)", "update_s_median", "{:.1f}"),
        ("extra rollout passes per step", "extra_passes_mean", "{:.2f}"),
        ("prompt groups sampled", "prompts_sampled", "{:.0f}"),
        ("share of sampled groups with reward variance", "signal_share_of_sampled", "{:.2f}"),
        ("groups with variance trained per step", "signal_groups_per_step", "{:.2f}"),
        ("groups with variance trained per minute", "signal_groups_per_minute", "{:.2f}"),
        ("sampled reward (mean over steps)", "sampled_reward_mean", "{:.3f}"),
    ):
        ratio = on[key] / off[key] if off[key] else float("nan")
        lines.append(f"| {label} | {fmt.format(off[key])} | {fmt.format(on[key])} | {ratio:.2f}× |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--set", dest="extra", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    import ray

    work = Path(tempfile.mkdtemp(prefix="relay-dynsamp-"))
    ray.init()
    try:
        result = {
            "command": " ".join(["python -m benchmarks.dynamic_sampling", *(sys.argv[1:] if argv is None else argv)]),
            "filter_off": run_arm(False, args.steps, work, args.extra),
            "filter_on": run_arm(True, args.steps, work, args.extra),
        }
    finally:
        ray.shutdown()
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(result, indent=1))
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
