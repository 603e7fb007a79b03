"""On-policy vs one-step-off-policy, side by side: the same job with ``trainer.max_staleness`` 0 and 1, the
collect side (rollout, actor_ref, reward) pinned to one core and the learner to the other, so the two can
only overlap, never share cores (what separate GPUs give a cluster).

    python -m benchmarks.staleness [--steps 4] [--set key=value ...]

Reports per arm: seconds per step (median over the steps after the first, which compiles), the phases,
each role's busy share of the wall time (from the run's ``timeline.json``), the staleness, the IS weight
and the log-prob gap. Writes ``benchmarks/results/staleness.json`` and prints a Markdown table.
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
RESULT = REPO / "benchmarks" / "results" / "staleness.json"
PINNED = [
    "rollout.resources.cpu_affinity=[0]",
    "actor_ref.resources.cpu_affinity=[0]",
    "reward.resources.cpu_affinity=[0]",
    "learner.resources.cpu_affinity=[1]",
]


def arm_overrides(k: int, steps: int, out_dir: Path, extra: list[str]) -> list[str]:
    return [
        *PINNED,
        f"trainer.max_staleness={k}",
        "algorithm.rollout_is=tis",
        f"trainer.total_training_steps={steps}",
        f"trainer.output_dir={out_dir}",
        f"trainer.run_name=staleness_{k}",
        "trainer.save_freq=-1",
        "trainer.test_freq=-1",
        *extra,
    ]


def summarize_arm(rows: list[dict[str, Any]], shares: dict[str, float], wall_s: float) -> dict[str, Any]:
    measured = rows[1:] or rows

    def med(key: str) -> float:
        return statistics.median(float(r.get(key, 0.0)) for r in measured)

    return {
        "steps": len(rows),
        "wall_s": wall_s,
        "step_s_median": med("timing/step"),
        "rollout_s_median": med("timing/rollout"),
        "actor_ref_and_reward_s_median": med("timing/actor_ref_and_reward"),
        "update_s_median": med("timing/update"),
        "rollout_wait_s_median": med("timing/rollout_wait"),
        "staleness_mean": statistics.fmean(float(r.get("offpolicy/staleness_mean", 0.0)) for r in measured),
        "is_weight_mean": statistics.fmean(float(r.get("actor/rollout_is_weight", 1.0)) for r in measured),
        "logprob_gap_mean": med("logprob_gap/rollout_vs_learner_mean"),
        "busy_share": shares,
    }


def run_arm(k: int, steps: int, work: Path, extra: list[str]) -> dict[str, Any]:
    from relay.config import load_config
    from relay.models.paths import resolve_model_path
    from relay.run.timeline import TIMELINE_NAME, busy_shares, spans_from_trace
    from trainer import train

    loaded = load_config(REPO / "configs" / "default.yaml", arm_overrides(k, steps, work, extra), environ={})
    run_dir = work / f"staleness_{k}"
    start = time.perf_counter()
    code = train(loaded, resolve_model_path(loaded.cfg.model.path), run_dir)
    wall = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"arm max_staleness={k} failed with exit code {code}; see {run_dir}")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    spans = spans_from_trace(json.loads((run_dir / TIMELINE_NAME).read_text()))
    first_step_end = max(s.end for s in spans if s.step == 0 and s.role == "learner")
    shares = busy_shares([s for s in spans if s.start >= first_step_end])  # after the compiling first step
    return {**summarize_arm(rows, shares, wall), "per_step": rows}


def table(result: dict[str, Any]) -> str:
    off, on = result["k0"], result["k1"]
    lines = ["| | max_staleness=0 | max_staleness=1 | 1 / 0 |", "|---|---:|---:|---:|"]
    for label, key, fmt in (
        ("s/step (median, after the first step)", "step_s_median", "{:.1f}"),
        ("rollout s (inside the collect)", "rollout_s_median", "{:.1f}"),
        ("actor_ref + reward s", "actor_ref_and_reward_s_median", "{:.1f}"),
        ("update s", "update_s_median", "{:.1f}"),
        ("update waited for its collect, s", "rollout_wait_s_median", "{:.1f}"),
        ("staleness (updates)", "staleness_mean", "{:.2f}"),
        ("TIS weight, token mean", "is_weight_mean", "{:.4f}"),
        ("rollout-vs-learner log-prob gap, mean", "logprob_gap_mean", "{:.4f}"),
    ):
        ratio = on[key] / off[key] if off[key] else float("nan")
        lines.append(f"| {label} | {fmt.format(off[key])} | {fmt.format(on[key])} | {ratio:.2f}× |")
    for role in on["busy_share"]:
        a, b = off["busy_share"].get(role, 0.0), on["busy_share"][role]
        ratio = b / a if a else 0.0
        lines.append(f"| {role} busy, share of wall time | {100 * a:.0f}% | {100 * b:.0f}% | {ratio:.2f}× |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--set", dest="extra", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    import ray

    work = Path(tempfile.mkdtemp(prefix="relay-staleness-"))
    ray.init()
    try:
        result = {
            "command": " ".join(["python -m benchmarks.staleness", *(sys.argv[1:] if argv is None else argv)]),
            "k0": run_arm(0, args.steps, work, args.extra),
            "k1": run_arm(1, args.steps, work, args.extra),
        }
    finally:
        ray.shutdown()
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(result, indent=1))
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
