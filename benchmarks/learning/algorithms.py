"""The algorithm menu on the toy reward: does each advantage estimator and policy loss learn, and how fast.

    python -m benchmarks.learning.algorithms [--steps 40] [--arms all] [--mini-batches 2] [--seed 0]

Every arm is the real trainer's step (all roles on a local Ray: vLLM rollout, actor copy, reward, JAX learner) on
the tiny random Llama (``relay.models.tiny``) with the toy reward of ``tests/roles/test_learning.py``: the share
of response tokens with an id below 4096 (~0.08 for the random model, 1.0 at best). 4 prompts x 8 samples, 16
new tokens, lr 1e-2, no KL. Each step's batch is split into ``--mini-batches`` optimizer steps with the old
log-probs from the actor copy, so the ratios leave 1 and the losses' clipping matters (one optimizer step per
batch would make every loss the plain policy gradient at ratio 1). The estimator arms use the ``vanilla`` loss,
the loss arms the ``grpo`` estimator.

Per arm: the reward's mean over the first and the last 5 steps, the first step whose 5-step running mean passes
0.5 and 0.9 (``-`` if never), the largest rollout-vs-actor-copy log-prob gap (same weights: the engines' mismatch)
and the seconds per step. Not a timing
benchmark: a count of steps, each arm one seed (say so when comparing). Writes
``benchmarks/results/algorithms.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from relay.metrics import outcomes as om
from relay.metrics import policy as pm
from relay.repo import REPO_ROOT

RESULTS = REPO_ROOT / "benchmarks" / "results"
ESTIMATORS = ("grpo", "grpo_mean", "rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax")
LOSSES = ("gspo", "cispo", "geo_mean", "clip_cov", "kl_cov")
# The sequence-level losses with the aggregation their papers use; every loss keeps its own default ranges (gspo's
# 3e-4 / 4e-4 too, though the toy's sequence ratios move by far more than a large model's at its lr).
LOSS_EXTRAS = {
    "gspo": ("algorithm.loss_agg_mode=seq-mean-token-mean",),
    "geo_mean": ("algorithm.loss_agg_mode=seq-mean-token-mean",),
}


def arm_overrides(name: str) -> tuple[str, ...]:
    """The config overrides of an arm: ``estimator:<name>`` or ``loss:<name>``."""
    kind, value = name.split(":")
    if kind == "estimator":
        return (f"algorithm.adv_estimator={value}",)
    return (f"algorithm.policy_loss={value}", *LOSS_EXTRAS.get(value, ()))


def first_passing(rewards: list[float], threshold: float, window: int = 5) -> int | None:
    """The first step (0-based) at which the mean of the last ``window`` rewards is >= ``threshold``.

    Worked example: rewards ``[0.1, 0.6, 0.7, 0.9, 1.0]``, window 2, threshold 0.8 -> step 3 ((0.7 + 0.9) / 2)."""
    for step in range(window - 1, len(rewards)):
        if float(np.mean(rewards[step - window + 1 : step + 1])) >= threshold:
            return step
    return None


def toy_overrides(model_dir: Path | str, name: str, mini_batches: int, seed: int) -> list[str]:
    """The config overrides (on ``configs/tiny.yaml``) of one arm's toy-reward run."""
    from benchmarks.harness.toy_reward import TOY_REWARD_OVERRIDES

    return [
        f"model.path={model_dir}",
        *TOY_REWARD_OVERRIDES,
        "rollout.batch_size=4",
        "rollout.n=8",
        "data.max_response_length=16",
        "train.optimizer.lr_schedule.peak_value=1e-2",
        f"train.micro_batch_size={32 // mini_batches}",  # a mini-batch's sequences in one micro-batch
        f"train.mini_batch_size={4 // mini_batches}",
        "algorithm.old_log_prob_source=actor",
        "algorithm.use_kl_loss=false",
        f"trainer.seed={seed}",
        *arm_overrides(name),
    ]


def run_arm(model_dir: Path, name: str, steps: int, mini_batches: int, seed: int) -> dict:
    from transformers import AutoTokenizer

    from driver.launch import start_roles, stop_roles
    from driver.step import run_step
    from placement.plan import build_plan
    from relay.config import load_config
    from relay.grpo.kl_controller import KLController
    from relay.tasks.prompt_source import PromptSource

    overrides = toy_overrides(model_dir, name, mini_batches, seed)
    loaded = load_config(REPO_ROOT / "configs" / "tiny.yaml", overrides, environ={})
    cfg = loaded.cfg
    roles = start_roles(loaded, build_plan(cfg), str(model_dir))
    prompts = PromptSource.from_config(cfg.data, AutoTokenizer.from_pretrained(model_dir), 4)
    start = time.perf_counter()
    try:
        rows = [
            run_step(roles, prompts.next_batch(), cfg, step, KLController.from_config(cfg.algorithm))[1]
            for step in range(steps)
        ]
    finally:
        stop_roles(roles)
    rewards = [float(r[om.REWARD_MEAN]) for r in rows]
    return {
        "arm": name,
        "rewards": rewards,
        "first5": float(np.mean(rewards[:5])),
        "last5": float(np.mean(rewards[-5:])),
        "step_0.5": first_passing(rewards, 0.5),
        "step_0.9": first_passing(rewards, 0.9),
        # rollout vs the actor copy (same weights): the engine mismatch. The learner's gap would include the first
        # mini-batch's update for the second mini-batch's rows.
        "gap_max": max(float(r.get(pm.LOGPROB_GAP_ROLLOUT_VS_ACTOR_MAX, 0.0)) for r in rows),
        "seconds_per_step": (time.perf_counter() - start) / steps,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--arms", default="all", help="comma-separated estimator:<name> / loss:<name>, or all")
    p.add_argument("--mini-batches", type=int, default=2, choices=(1, 2, 4), help="optimizer steps per step")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    every = [f"estimator:{e}" for e in ESTIMATORS] + [f"loss:{x}" for x in LOSSES]
    arms = every if args.arms == "all" else args.arms.split(",")
    unknown = sorted(set(arms) - set(every))
    if unknown:
        p.error(f"--arms: unknown {unknown}; choose from {', '.join(every)}")

    from benchmarks.harness.local_ray import ensure_ray, shutdown_ray
    from relay.models.tiny import build_tiny_llama

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_tiny_llama(Path(tmp) / "tiny")
        ensure_ray()
        try:
            for arm in arms:
                results.append(run_arm(model_dir, arm, args.steps, args.mini_batches, args.seed))
                r = results[-1]
                print(f"{arm}: {r['first5']:.3f} -> {r['last5']:.3f}, 0.9 at step {r['step_0.9']}", flush=True)
        finally:
            shutdown_ray()
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "algorithms.json"
    payload = {"date": time.strftime("%Y-%m-%d"), "machine": platform.platform(), "args": vars(args), "arms": results}
    out.write_text(json.dumps(payload, indent=1))
    print("| arm | reward first 5 -> last 5 | mean-5 >= 0.5 at step | >= 0.9 at step | rollout-vs-actor gap max |")
    print("|---|---|---:|---:|---:|")
    for r in results:
        cells = [str(r[k]) if r[k] is not None else "-" for k in ("step_0.5", "step_0.9")]
        row = f"| {r['arm']} | {r['first5']:.3f} -> {r['last5']:.3f} | {cells[0]} | {cells[1]} | "
        print(row + f"{r['gap_max']:.1e} |")
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
