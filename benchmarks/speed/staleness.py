"""On-policy vs one-step-off-policy, side by side: the same job with ``trainer.max_staleness`` 0 and 1, the
collect side (rollout, actor_ref, reward) pinned to one core and the learner to the other, so the two can
only overlap, never share cores (what separate GPUs give a cluster).

    python -m benchmarks.speed.staleness [--steps 4] [--set key=value ...]

Reports per arm: seconds per step (median over the steps after the first, which compiles), the phases,
each role's busy share of the wall time (from the run's ``timeline.json``), the staleness, the IS weight
and the log-prob gap. Writes ``benchmarks/results/staleness.json`` and prints a Markdown table.
"""

from __future__ import annotations

import json
import statistics
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.speed.ab import ab_main, common_overrides, ratio_table, run_job
from relay.metrics import policy as pm
from relay.metrics import system as sm
from relay.repo import REPO_ROOT

RESULT = REPO_ROOT / "benchmarks" / "results" / "staleness.json"
PINNED = [
    "rollout.resources.cpu_affinity=[0]",
    "actor_ref.resources.cpu_affinity=[0]",
    "reward.resources.cpu_affinity=[0]",
    "learner.resources.cpu_affinity=[1]",
]


def summarize_arm(rows: list[dict[str, Any]], shares: dict[str, float], wall_s: float) -> dict[str, Any]:
    measured = rows[1:] or rows

    def med(key: str) -> float:
        return statistics.median(float(r.get(key, 0.0)) for r in measured)

    return {
        "steps": len(rows),
        "wall_s": wall_s,
        "step_s_median": med(sm.TIMING_STEP),
        "rollout_s_median": med(sm.TIMING_ROLLOUT),
        "actor_ref_and_reward_s_median": med(sm.TIMING_ACTOR_REF_AND_REWARD),
        "update_s_median": med(sm.TIMING_UPDATE),
        "rollout_wait_s_median": med(sm.TIMING_ROLLOUT_WAIT),
        "staleness_mean": statistics.fmean(float(r.get(pm.OFFPOLICY_STALENESS_MEAN, 0.0)) for r in measured),
        "is_weight_mean": statistics.fmean(float(r.get(pm.ACTOR_ROLLOUT_IS_WEIGHT, 1.0)) for r in measured),
        "logprob_gap_mean": med(pm.LOGPROB_GAP_ROLLOUT_MEAN),
        "busy_share": shares,
    }


def run_arm(k: int, steps: int, work: Path, extra: list[str]) -> dict[str, Any]:
    from relay.run.timeline import TIMELINE_NAME, busy_shares, spans_from_trace

    name = f"staleness_{k}"
    overrides = [*PINNED, f"trainer.max_staleness={k}", "algorithm.rollout_is=tis"]
    overrides += common_overrides(steps, work, name)
    rows, wall, _ = run_job([*overrides, *extra], work / name)
    spans = spans_from_trace(json.loads((work / name / TIMELINE_NAME).read_text()))
    first_step_end = max(s.end for s in spans if s.step == 0 and s.role == "learner")
    shares = busy_shares([s for s in spans if s.start >= first_step_end])  # after the compiling first step
    return {**summarize_arm(rows, shares, wall), "per_step": rows}


def table(result: dict[str, Any]) -> str:
    rows = (
        ("s/step (median, after the first step)", "step_s_median", "{:.1f}"),
        ("rollout s (inside the collect)", "rollout_s_median", "{:.1f}"),
        ("actor_ref + reward s", "actor_ref_and_reward_s_median", "{:.1f}"),
        ("update s", "update_s_median", "{:.1f}"),
        ("update waited for its collect, s", "rollout_wait_s_median", "{:.1f}"),
        ("staleness (updates)", "staleness_mean", "{:.2f}"),
        ("TIS weight, token mean", "is_weight_mean", "{:.4f}"),
        ("rollout-vs-learner log-prob gap, mean", "logprob_gap_mean", "{:.4f}"),
    )
    off, on = result["k0"], result["k1"]
    lines = ratio_table(off, on, ("max_staleness=0", "max_staleness=1"), rows)
    for role in on["busy_share"]:
        a, b = off["busy_share"].get(role, 0.0), on["busy_share"][role]
        ratio = b / a if a else 0.0
        lines.append(f"| {role} busy, share of wall time | {100 * a:.0f}% | {100 * b:.0f}% | {ratio:.2f}× |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    arms = {"k0": partial(run_arm, 0), "k1": partial(run_arm, 1)}
    return ab_main("benchmarks.speed.staleness", arms, table, RESULT, 4, argv, __doc__)


if __name__ == "__main__":
    raise SystemExit(main())
