"""Where the reference log-probs come from, measured: the actor_ref role (its own torch copy of the model, run
concurrently with the reward) vs the learner (a frozen JAX copy of the initial weights, a forward in each
micro-batch of the update). ``algorithm.ref_log_prob_source`` picks one; this script runs both on the step
benchmark's workload (SmolLM2-135M, 8 prompts x 4, 128 new tokens; ``benchmarks.speed.run``'s step question) in one
invocation and prints s/step, the phases and every role's peak memory, with the learner's arm as a ratio of the
actor_ref arm's.

    python -m benchmarks.speed.reference_source --steps 2     # results: benchmarks/results/reference_source.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.speed.relay_steps import Scenario, run_relay
from relay.metrics import system as sm
from relay.repo import REPO_ROOT

RESULT = REPO_ROOT / "benchmarks" / "results" / "reference_source.json"
ARMS = ("actor_ref", "learner")
ROWS = (
    ("s/step", sm.TIMING_STEP, "{:.1f}"),
    ("rollout s", sm.TIMING_ROLLOUT, "{:.1f}"),
    ("reference log-probs and reward s", sm.TIMING_ACTOR_REF_AND_REWARD, "{:.1f}"),
    ("update s", sm.TIMING_UPDATE, "{:.1f}"),
    ("learner peak RSS GiB", sm.MEMORY_PEAK_RSS.format(role="learner"), "{:.2f}"),
    ("rollout peak RSS GiB", sm.MEMORY_PEAK_RSS.format(role="rollout"), "{:.2f}"),
    ("actor_ref peak RSS GiB", sm.MEMORY_PEAK_RSS.format(role="actor_ref"), "{:.2f}"),
    ("reward peak RSS GiB", sm.MEMORY_PEAK_RSS.format(role="reward"), "{:.2f}"),
    ("roles summed GiB", sm.MEMORY_ROLES_PEAK, "{:.2f}"),
)


def table(result: dict[str, Any]) -> str:
    a, b = (result[arm]["median"] for arm in ARMS)
    header = "| median over the measured steps | actor_ref role | learner | learner / actor_ref |"
    lines = [header, "|---|---:|---:|---:|"]
    for label, key, fmt in ROWS:
        x, y = a.get(key, 0.0), b.get(key, 0.0)
        ratio = f"{y / x:.2f}×" if x else "—"
        lines.append(f"| {label} | {fmt.format(x)} | {fmt.format(y)} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.speed.reference_source", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--steps", type=int, default=2, help="measured steps per arm (one warm-up step more)")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    import ray

    from relay.models.paths import resolve_model_path

    model_dir = str(resolve_model_path(args.model))
    work = Path(tempfile.mkdtemp(prefix="relay-reference-source-"))
    result: dict[str, Any] = {
        "command": " ".join(["python -m benchmarks.speed.reference_source", *(argv or sys.argv[1:])])
    }
    ray.init()
    try:
        for arm in ARMS:
            scenario = Scenario(model_dir, 8, 4, 128, args.steps, extra=(f"algorithm.ref_log_prob_source={arm}",))
            result[arm] = run_relay(scenario, arm, work)
    finally:
        ray.shutdown()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
