"""The algorithm menu on GSM8K: estimators and losses side by side, each for the same wall-clock budget.

    python -m benchmarks.learning.algorithm_gsm8k [--config configs/gsm8k_smollm2_learn.yaml] [--minutes 15]
                                         [--arms grpo,rloo,gspo,cispo,rloo_kl05] [--mini-batch 2] [--problems 200]
                                         [--base-eval PATH] [--out outputs/algorithm_gsm8k] [--no-write]

Every arm is ``python trainer.py --config PRESET`` with ``trainer.time_budget_minutes=M`` and one change
(:data:`ARMS`), run one after another on the same machine, then the same greedy held-out evaluation as
``benchmarks.learning.relay_vs_trl`` (``driver.evaluate``, the first ``--problems`` GSM8K **test** problems). The base
model's evaluation is run once (or read from ``--base-eval``, a ``driver.evaluate`` JSON of the same problems).

Why ``--mini-batch 2`` (``train.mini_batch_size``, prompts per optimizer step, for every arm): the learning preset
takes one optimizer step per batch, whose importance ratios are all exactly 1 (the old log-probs are the
learner's own, before the step). There the policy losses differ only in how they aggregate tokens: ``cispo``'s
gradient is ``vanilla``'s exactly, and ``gspo``'s is ``vanilla``'s with ``seq-mean-token-mean``. With two optimizer
steps per batch the second one sees ratios away from 1, which is where the losses differ. The old log-probs are
then the rollout's (``algorithm.old_log_prob_source=rollout``: the learner's own would no longer be the old policy's
after the first step, and an actor copy would add a process and a forward). ``gspo`` runs with the paper's
``seq-mean-token-mean`` aggregation.

Per arm: optimizer steps, the training reward's mean over the first and the last 10 steps, its least-squares
slope per minute with the slope's standard error, and held-out accuracy and format rate with 95% Wilson
intervals, each arm minus ``grpo`` with a 95% Newcombe interval. One seed per arm: say so when comparing. Writes
``OUT/results.json``, ``OUT/report.md``, ``docs/algorithm_gsm8k_reward.png`` and the section between the
``algorithm-gsm8k`` markers of BENCHMARKS.md (``--no-write``: only into ``OUT``). Finished phases in ``OUT`` are
reused, so an interrupted run continues. Run it alone on the machine: the budget is wall-clock.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness.publish import publish, shown_path
from benchmarks.learning.relay_vs_trl import compare, evaluate, held_out, run_phase
from relay.metrics import outcomes as om
from relay.metrics import policy as pm
from relay.metrics import system as sm
from relay.repo import REPO_ROOT

PRESET = REPO_ROOT / "configs" / "gsm8k_smollm2_learn.yaml"  # the GSM8K learning preset every arm starts from
MARKS = ("<!-- algorithm-gsm8k:begin -->", "<!-- algorithm-gsm8k:end -->")
TITLE = "The algorithm menu on GSM8K at equal wall-clock"
SHARED = ["algorithm.old_log_prob_source=rollout"]  # with --mini-batch: every arm's old policy (see above)
ARMS: dict[str, list[str]] = {
    "grpo": [],
    "rloo": ["algorithm.adv_estimator=rloo"],
    "gspo": ["algorithm.policy_loss=gspo", "algorithm.loss_agg_mode=seq-mean-token-mean"],
    "cispo": ["algorithm.policy_loss=cispo"],
    # rloo with the preset's PG:KL balance: its advantages are not divided by the group std, so its policy gradient
    # is about half grpo's here while the KL loss's is not; Adam and the clip_norm undo a global scale, not that ratio.
    "rloo_kl05": ["algorithm.adv_estimator=rloo", "algorithm.kl_loss_coef=0.05"],
}


def shared_settings(mini_batch: int) -> list[str]:
    """What every arm sets besides its own change."""
    return [f"train.mini_batch_size={mini_batch}", *SHARED]


def reward_slope(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares slope of ``(minute, reward)`` points and its standard error (nan with fewer than 3 points).

    >>> slope, se = reward_slope([(0.0, 0.0), (1.0, 0.5), (2.0, 1.0)])
    >>> round(slope, 6), round(se, 6)
    (0.5, 0.0)
    """
    import numpy as np

    if len(points) < 3:
        return float("nan"), float("nan")
    x, y = np.array([p[0] for p in points]), np.array([p[1] for p in points])
    dx = x - x.mean()
    slope = float((dx * (y - y.mean())).sum() / (dx * dx).sum())
    residual = y - y.mean() - slope * dx
    se = float(np.sqrt((residual * residual).sum() / (len(x) - 2) / (dx * dx).sum()))
    return slope, se


def train_arm(name: str, overrides: list[str], args: argparse.Namespace) -> Path:
    from relay.checkpoint.store import latest_checkpoint

    run_dir = args.out / name
    if not run_dir.is_dir() or latest_checkpoint(run_dir) is None:
        shutil.rmtree(run_dir, ignore_errors=True)
        cmd = [sys.executable, "trainer.py", "--config", str(args.config)]
        settings = [f"trainer.output_dir={args.out}", f"trainer.run_name={name}"]
        settings += [f"trainer.time_budget_minutes={args.minutes}", *shared_settings(args.mini_batch)]
        for setting in settings + overrides:
            cmd += ["--set", setting]
        run_phase(name, cmd, args.out)
    return run_dir


def arm_summary(name: str, rows: list[dict[str, Any]], held: dict[str, Any]) -> dict[str, Any]:
    from benchmarks.learning.wall_clock import first_last_means, wall_clock_series
    from relay.evaluation import wilson_interval

    rewards = [float(r[om.REWARD_MEAN]) for r in rows if r.get(om.REWARD_MEAN) is not None]
    first, last = first_last_means(rewards, 10) if rewards else (float("nan"), float("nan"))
    slope, se = reward_slope(wall_clock_series(rows, om.REWARD_MEAN))
    n = held["problems"]
    return {
        "arm": name,
        "overrides": ARMS[name],
        "steps": len(rows),
        "seconds_per_step": held["minutes"] * 60 / max(len(rows), 1),
        "reward_first10": first,
        "reward_last10": last,
        "reward_slope_per_min": slope,
        "reward_slope_se": se,
        "kl_last10": first_last_means([float(r.get(pm.ACTOR_KL, float("nan"))) for r in rows], 10)[1],
        "format_rate_ci": list(wilson_interval(round(held["format_rate"] * n), n)),
    }


def report(args: argparse.Namespace, results: dict[str, Any]) -> str:
    lines = [
        f"Reproduce: `python -m benchmarks.learning.algorithm_gsm8k --config {shown_path(args.config)} "
        f"--minutes {args.minutes} --mini-batch {args.mini_batch}`; every arm: "
        f"{', '.join(f'`{o}`' for o in shared_settings(args.mini_batch))} "
        f"({results['problems']} GSM8K test problems, greedy; {results['machine']}; "
        f"{results['date']}; one seed per arm, run one after another in one invocation).",
        "",
        "| arm | change | steps | s/step | reward first 10 → last 10 | reward slope /min (± s.e.) | KL last 10 | "
        "held-out accuracy [95% CI] | format rate [95% CI] | greedy length |",
        "|---|---|---:|---:|---|---|---:|---|---|---:|",
    ]
    base = results["held_out"]["base"]
    lines.append(
        f"| base | - | 0 | - | - | - | - | {base['accuracy']:.3f} [{base['accuracy_ci'][0]:.3f}, "
        f"{base['accuracy_ci'][1]:.3f}] | {base['format_rate']:.3f} | {base['length_mean']:.0f} |"
    )
    for name, s in results["arms"].items():
        e = results["held_out"][name]
        change = ", ".join(f"`{o}`" for o in s["overrides"]) or "(the preset)"
        lines.append(
            f"| {name} | {change} | {s['steps']} | {s['seconds_per_step']:.1f} | {s['reward_first10']:.3f} → "
            f"{s['reward_last10']:.3f} | {s['reward_slope_per_min']:+.4f} ± {s['reward_slope_se']:.4f} | "
            f"{s['kl_last10']:.3f} | {e['accuracy']:.3f} [{e['accuracy_ci'][0]:.3f}, {e['accuracy_ci'][1]:.3f}] | "
            f"{e['format_rate']:.3f} [{s['format_rate_ci'][0]:.3f}, {s['format_rate_ci'][1]:.3f}] | "
            f"{e['length_mean']:.0f} |"
        )
    diffs = results.get("minus_grpo", {})
    if diffs:
        lines += ["", "Each arm minus `grpo` (95% Newcombe interval):", ""]
        for name, by_key in diffs.items():
            cells = [
                f"{key.replace('_', ' ')} {d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"
                for key, d in by_key.items()
            ]
            lines.append(f"- `{name}`: " + "; ".join(cells))
    lines += ["", "![training reward by arm](docs/algorithm_gsm8k_reward.png)"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=PRESET)
    parser.add_argument("--minutes", type=float, default=15.0, help="training budget per arm")
    parser.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, of {', '.join(ARMS)}")
    parser.add_argument("--mini-batch", type=int, default=2, help="train.mini_batch_size (prompts) for every arm")
    parser.add_argument("--problems", type=int, default=200, help="GSM8K test problems (the first N)")
    parser.add_argument("--base-eval", type=Path, default=None, help="a driver.evaluate JSON of the base model")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "outputs" / "algorithm_gsm8k")
    parser.add_argument("--no-write", action="store_true", help="leave BENCHMARKS.md, docs/ and results/ alone")
    args = parser.parse_args(argv)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown or not arms:
        print(f"error: --arms {args.arms!r}: unknown {unknown}; choose from {', '.join(ARMS)}", file=sys.stderr)
        return 2
    args.config, args.out = args.config.resolve(), args.out.resolve()
    from benchmarks.learning.wall_clock import training_curve_plot, wall_clock_series
    from relay.config import ConfigError, load_config
    from relay.run.summarize import load_metrics

    try:  # every arm's config is checked before the first one starts
        for name in arms:
            sets = [*shared_settings(args.mini_batch), *ARMS[name]]
            cfg = load_config(args.config, sets).cfg
    except ConfigError as exc:
        print(f"error: arm {name}: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    if args.base_eval is not None and not (args.out / "eval_base.json").is_file():
        shutil.copyfile(args.base_eval, args.out / "eval_base.json")
    results: dict[str, Any] = {
        "minutes": args.minutes,
        "mini_batch": args.mini_batch,
        "problems": args.problems,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, no GPU",
        "date": time.strftime("%Y-%m-%d"),
        "held_out": {"base": held_out("base", evaluate("eval_base", cfg.model.path, args), 0.0)},
        "arms": {},
    }
    runs: dict[str, list[dict[str, Any]]] = {}
    for name in arms:
        run_dir = train_arm(name, ARMS[name], args)
        runs[name] = load_metrics(run_dir / "metrics.jsonl")
        minutes = runs[name][-1][sm.TIME_ELAPSED] / 60
        results["held_out"][name] = held_out(name, evaluate(f"eval_{name}", run_dir, args), minutes)
        results["arms"][name] = arm_summary(name, runs[name], results["held_out"][name])
    if "grpo" in runs:
        grpo = results["held_out"]["grpo"]
        results["minus_grpo"] = {
            name: {key: compare(results["held_out"][name], grpo, key) for key in ("accuracy", "format_rate")}
            for name in runs
            if name != "grpo"
        }
    section = report(args, results)
    curves = {name: wall_clock_series(rows, om.REWARD_MEAN) for name, rows in runs.items()}
    plot_dir = args.out if args.no_write else REPO_ROOT / "docs"
    training_curve_plot(plot_dir / "algorithm_gsm8k_reward.png", "Training reward by arm", om.REWARD_MEAN, curves)
    publish("algorithm_gsm8k", results, section, MARKS, TITLE, write=not args.no_write, out=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
