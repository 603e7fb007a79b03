"""LoRA vs full fine-tuning: the same Relay steps, one invocation, side by side.

    python -m benchmarks.speed.lora [--model smollm2-135m] [--prompts 8] [--n 4] [--max-new-tokens 128] [--steps 2]
        [--rank 16] [--alpha 32] [--arms full,lora,lora_merged,lora_merged_actor_ref]

Every arm runs the real trainer (all roles on a local Ray) on the step benchmark's workload (the first
``prompts`` GSM8K training problems, ``prompts x n`` samples, ``max-new-tokens`` new tokens). ``lora`` adds
``model.lora.rank/alpha`` (adapters on every projection; vLLM serves base + adapter); ``lora_merged`` also sets
``rollout.lora_serving=false`` (the rollout merges each synced adapter into its base and reloads that);
``lora_merged_actor_ref`` also sets ``algorithm.ref_log_prob_source=actor_ref`` (the reference log-probs from the
actor_ref role's own base model instead of the learner's base with the adapters off, the default). One
warm-up step per arm (compiles, engine warm-up) is reported apart. Figures per arm, medians of the measured steps:
s/step, update s, learner peak RSS, roles summed, the bytes a sync sends (``sync/bytes``) and its seconds
(``sync/seconds``: the rollout's load; ``timing/sync``: the driver's whole sync phase). Writes
``benchmarks/results/lora.json`` and prints a Markdown table, each LoRA arm as a ratio of the full fine-tuning
arm of the same invocation (``full`` always runs: the baseline).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from typing import Any

from benchmarks.harness.local_ray import ensure_ray, shutdown_ray
from benchmarks.speed.relay_steps import Scenario, run_relay
from relay.metrics import policy as pm
from relay.metrics import system as sm
from relay.repo import REPO_ROOT

LORA_ARMS = ("lora", "lora_merged", "lora_merged_actor_ref")
RESULTS = REPO_ROOT / "benchmarks" / "results"
FIGURES = (
    ("s/step", sm.TIMING_STEP),
    ("update s", sm.TIMING_UPDATE),
    ("log-probs + reward phase s", sm.TIMING_ACTOR_REF_AND_REWARD),
    ("learner peak RSS GiB", sm.MEMORY_PEAK_RSS.format(role="learner")),
    ("roles summed GiB", sm.MEMORY_ROLES_PEAK),
    ("sync MB", sm.SYNC_BYTES),
    ("rollout load s", sm.SYNC_SECONDS),
    ("sync phase s", sm.TIMING_SYNC),
)


def main(argv: list[str] | None = None) -> int:
    """Run every wanted arm on a local Ray, write ``benchmarks/results/lora.json`` and print the table."""
    args, wanted = _parse_args(argv)
    from relay.models.paths import resolve_model_path

    model = str(resolve_model_path(args.model))
    extras = _arm_overrides(args.rank, args.alpha)
    ensure_ray()
    try:
        arms = {
            name: run_relay(
                Scenario(model, args.prompts, args.n, args.max_new_tokens, args.steps, extra=extras[name]), name
            )
            for name in wanted
        }
    finally:
        shutdown_ray()
    for arm in arms.values():
        gaps = [s.get(pm.LOGPROB_GAP_ROLLOUT_MAX) for s in arm["steps"]]
        arm["gap_max"] = max((g for g in gaps if g is not None), default=None)
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"platform": platform.platform()},
        "args": vars(args),
        "arms": arms,
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "lora.json"
    out.write_text(json.dumps(result, indent=2))
    _print_table(arms, wanted, args.steps)
    print(f"results: {out}")
    return 0


def _parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """The command line, and the arms to run: ``full`` first, then the LoRA arms asked for."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--n", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--steps", type=int, default=2, help="measured steps per arm (one warm-up step more)")
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--alpha", type=float, default=32.0)
    p.add_argument("--arms", default="full,lora,lora_merged", help=f"comma-separated: full, {', '.join(LORA_ARMS)}")
    args = p.parse_args(argv)
    unknown = sorted(set(args.arms.split(",")) - {"full", *LORA_ARMS})
    if unknown:
        p.error(f"--arms: unknown {unknown}; choose from full, {', '.join(LORA_ARMS)}")
    return args, ["full", *(a for a in args.arms.split(",") if a in LORA_ARMS)]


def _arm_overrides(rank: int, alpha: float) -> dict[str, tuple[str, ...]]:
    """Each arm's ``--set`` overrides of the shared scenario."""
    lora = (f"model.lora.rank={rank}", f"model.lora.alpha={alpha}")
    merged = (*lora, "rollout.lora_serving=false")
    return {
        "full": (),
        "lora": lora,
        "lora_merged": merged,
        "lora_merged_actor_ref": (*merged, "algorithm.ref_log_prob_source=actor_ref"),
    }


def _print_table(arms: dict[str, dict[str, Any]], wanted: list[str], steps: int) -> None:
    """A Markdown table of each figure's median over the measured steps, each LoRA arm also as a ratio of full."""
    others = wanted[1:]
    print(
        f"| figure (median of {steps} steps) | full fine-tuning | " + " | ".join(f"{a} (x full)" for a in others) + " |"
    )
    print("|---|---:|" + "---:|" * len(others))
    for label, key in FIGURES:
        med = {a: statistics.median(s[key] for s in arms[a]["steps"]) for a in wanted}
        scale = 1e-6 if key == sm.SYNC_BYTES else 1.0
        cells = " | ".join(f"{med[a] * scale:.3g} ({med[a] / med['full']:.3f}x)" for a in others)
        print(f"| {label} | {med['full'] * scale:.3g} | {cells} |")


if __name__ == "__main__":
    raise SystemExit(main())
