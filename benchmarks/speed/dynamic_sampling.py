"""Dynamic sampling on and off, side by side: the default job on GSM8K with and without
``algorithm.filter_groups``, the same seeds and steps, one after the other in one invocation.

    python -m benchmarks.speed.dynamic_sampling [--steps 5] [--set key=value ...]

Reports per arm: seconds per step, the share of sampled groups with reward variance (the ones that carry a
gradient), such groups trained per step and per wall-clock minute, the policy's sampled reward, and the
extra rollout passes. Writes ``benchmarks/results/dynamic_sampling.json`` and prints a Markdown table.
"""

from __future__ import annotations

import statistics
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.speed.ab import ab_main, common_overrides, ratio_table, run_job
from relay.metrics import outcomes as om
from relay.metrics import policy as pm
from relay.metrics import system as sm
from relay.repo import REPO_ROOT

RESULT = REPO_ROOT / "benchmarks" / "results" / "dynamic_sampling.json"


def summarize_arm(rows: list[dict[str, Any]], wall_s: float) -> dict[str, float]:
    """The arm's figures from its ``metrics.jsonl`` rows (every step, the compiling first one included)."""
    steps = len(rows)
    filtered = om.FILTER_PROMPTS_SAMPLED in rows[0]
    if filtered:
        sampled = sum(r[om.FILTER_PROMPTS_SAMPLED] for r in rows)
        signal = sum(r[om.FILTER_GROUPS_KEPT] + r[om.FILTER_GROUPS_SURPLUS] for r in rows)
        trained_signal = sum(r[om.FILTER_GROUPS_KEPT] for r in rows)
    else:
        groups = [r[pm.BATCH_SEQUENCES] / r["rollout_n"] for r in rows]
        sampled = sum(groups)
        signal = sum(g * (1 - r[pm.ADVANTAGE_ZERO_GROUPS]) for g, r in zip(groups, rows, strict=True))
        trained_signal = signal
    step_s = [r[sm.TIMING_STEP] for r in rows]
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
        "sampled_reward_mean": statistics.fmean(r[om.REWARD_MEAN] for r in rows),
        "extra_passes_mean": statistics.fmean(r.get(om.FILTER_EXTRA_PASSES, 0.0) for r in rows),
        "rollout_s_median": statistics.median(r[sm.TIMING_ROLLOUT] for r in rows),
        "update_s_median": statistics.median(r[sm.TIMING_UPDATE] for r in rows),
    }


def run_arm(filter_on: bool, steps: int, work: Path, extra: list[str]) -> dict[str, Any]:
    name = "filter_on" if filter_on else "filter_off"
    overrides = [f"algorithm.filter_groups.enable={str(filter_on).lower()}", *common_overrides(steps, work, name)]
    rows, wall, cfg = run_job([*overrides, *extra], work / name)
    for r in rows:
        r["rollout_n"] = cfg.rollout.n
    return {**summarize_arm(rows, wall), "per_step": rows}


def table(result: dict[str, Any]) -> str:
    rows = (
        ("s/step (median)", "step_s_median", "{:.1f}"),
        ("rollout s/step (median)", "rollout_s_median", "{:.1f}"),
        ("update s/step (median)", "update_s_median", "{:.1f}"),
        ("extra rollout passes per step", "extra_passes_mean", "{:.2f}"),
        ("prompt groups sampled", "prompts_sampled", "{:.0f}"),
        ("share of sampled groups with reward variance", "signal_share_of_sampled", "{:.2f}"),
        ("groups with variance trained per step", "signal_groups_per_step", "{:.2f}"),
        ("groups with variance trained per minute", "signal_groups_per_minute", "{:.2f}"),
        ("sampled reward (mean over steps)", "sampled_reward_mean", "{:.3f}"),
    )
    return "\n".join(ratio_table(result["filter_off"], result["filter_on"], ("filter off", "filter on"), rows))


def main(argv: list[str] | None = None) -> int:
    arms = {"filter_off": partial(run_arm, False), "filter_on": partial(run_arm, True)}
    return ab_main("benchmarks.speed.dynamic_sampling", arms, table, RESULT, 5, argv, __doc__)


if __name__ == "__main__":
    raise SystemExit(main())
