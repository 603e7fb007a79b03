"""Does SmolLM2 learn to call a calculator on GSM8K? The tools preset beside the learning preset at equal wall-clock.

    python -m benchmarks.learning.tools [--minutes M] [--problems 200] [--out outputs/tools_learning] [--fresh]
        [--no-write]

1. ``eval_base_tools`` / ``eval_base_learn``: ``python -m driver.evaluate`` of the base model, greedy, on the first
   ``--problems`` GSM8K test problems, under each preset's prompt and response length, the calculator available
   (``rollout.agent.enable=true`` at evaluation for both: a model that never writes a call is unaffected).
2. ``tools`` / ``learn``: ``python trainer.py`` with ``configs/gsm8k_smollm2_tools.yaml`` and
   ``configs/gsm8k_smollm2_learn.yaml``, each with ``trainer.time_budget_minutes=M`` (default: the learning
   preset's), one after the other.
3. ``eval_tools`` / ``eval_learn``: the same evaluation of each run's final checkpoint.
4. ``report``: accuracy and format rate with 95% intervals, the greedy tool-call rate and the share of correct
   answers that called the calculator, the tools-minus-learn differences; ``docs/tools_learning_calls.png`` (tool
   calls per response over training, and the training reward of both runs); the section between the
   ``tools-learning`` markers of BENCHMARKS.md; ``benchmarks/results/tools_learning.json``.

A phase whose output already exists in ``OUT`` is reused (``--fresh`` clears ``OUT``). Run it alone on the
machine: the trainers are timed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.cli import add_held_out_options, cpu_label, phases_dir
from benchmarks.harness.publish import publish
from benchmarks.learning.relay_vs_trl import compare, difference_lines, held_out, run_phase, trainer_summary
from relay.metrics import outcomes as om
from relay.metrics import system as sm
from relay.metrics import validation as vm
from relay.repo import REPO_ROOT

PRESETS = {
    "tools": REPO_ROOT / "configs" / "gsm8k_smollm2_tools.yaml",
    "learn": REPO_ROOT / "configs" / "gsm8k_smollm2_learn.yaml",
}
TOOLS_AT_EVALUATION = ["--set", "rollout.agent.enable=true", "--set", "rollout.agent.tools=[calculator]"]
MARKS = ("<!-- tools-learning:begin -->", "<!-- tools-learning:end -->")


def evaluate(name: str, checkpoint: Path | str, preset: Path, args: argparse.Namespace) -> dict[str, float]:
    """Greedy held-out evaluation with ``preset``'s settings and the calculator available; cached in ``OUT``."""
    result = args.out / f"{name}.json"
    if not result.is_file():
        cmd = [sys.executable, "-m", "driver.evaluate", "--checkpoint", str(checkpoint), "--config", str(preset)]
        cmd += ["--samples", str(args.problems), "--k", "0", "--out", str(result), *TOOLS_AT_EVALUATION]
        run_phase(name, cmd, args.out)
    return json.loads(result.read_text())


def train(name: str, preset: Path, args: argparse.Namespace) -> Path:
    from relay.checkpoint.store import latest_checkpoint

    run_dir = args.out / name
    if not run_dir.is_dir() or latest_checkpoint(run_dir) is None:
        shutil.rmtree(run_dir, ignore_errors=True)
        cmd = [sys.executable, "trainer.py", "--config", str(preset), "--set", f"trainer.output_dir={args.out}"]
        cmd += ["--set", f"trainer.run_name={name}", "--set", f"trainer.time_budget_minutes={args.minutes}"]
        run_phase(name, cmd, args.out)
    return run_dir


def tool_use(metrics: dict[str, float]) -> dict[str, float]:
    """The greedy tool-call rate and the share of correct greedy answers that called a tool (0 when none did)."""
    return {
        "tool_call_rate": metrics.get(vm.VAL_TOOL_CALL_RATE, 0.0),
        "correct_with_tool_share": metrics.get(vm.VAL_CORRECT_WITH_TOOL, 0.0),
    }


def report(args: argparse.Namespace, results: dict[str, Any]) -> str:
    """The Markdown section of BENCHMARKS.md for ``results``: each preset's model held out before and after
    training, with its tool use, and tools − learn with its interval."""
    lines = [
        f"Reproduce: `python -m benchmarks.learning.tools --minutes {results['budget_minutes']:g}` "
        f"({results['problems']} GSM8K test problems, greedy, the calculator available at evaluation; "
        f"{results['machine']}; {results['date']}).",
        "",
        "| model | preset | training min | steps | held-out accuracy [95% CI] | format rate | tool-call rate | "
        "correct answers that called |",
        "|---|---|---:|---:|---|---:|---:|---:|",
    ]
    for name, preset in (("base", "tools"), ("base", "learn"), ("trained", "tools"), ("trained", "learn")):
        e = results["held_out"][f"{name}_{preset}"]
        steps = results["trainers"].get(preset, {}).get("steps", 0) if name == "trained" else 0
        lines.append(
            f"| {name} | {preset} | {e['minutes']:.1f} | {steps} | {e['accuracy']:.3f} [{e['accuracy_ci'][0]:.3f}, "
            f"{e['accuracy_ci'][1]:.3f}] | {e['format_rate']:.3f} | {e['tool_call_rate']:.3f} | "
            f"{e['correct_with_tool_share']:.3f} |"
        )
    lines += difference_lines("Tools − learn", results["tools_minus_learn"])
    lines += ["", "![tool calls over training](docs/tools_learning_calls.png)"]
    return "\n".join(lines)


def plot(runs: dict[str, list[dict[str, Any]]], path: Path) -> Path:
    """Tool calls per response over the tools run, and the training reward of both runs, against minutes."""
    from benchmarks.learning.wall_clock import training_curve_plot, wall_clock_series

    curves = {"tools: tool calls per response": wall_clock_series(runs["tools"], om.AGENT_TOOL_CALLS_PER_RESPONSE)}
    curves |= {f"{name}: training reward": wall_clock_series(rows, om.REWARD_MEAN) for name, rows in runs.items()}
    return training_curve_plot(path, "Calculator calls and reward over training", "per response", curves)


def main(argv: list[str] | None = None) -> int:
    from relay.config import load_config
    from relay.evaluation import wilson_interval
    from relay.run.summarize import load_metrics

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=None, help="budget per run (default: the learning preset's)")
    add_held_out_options(parser, "tools_learning")
    args = parser.parse_args(argv)
    learn_cfg = load_config(PRESETS["learn"], []).cfg
    args.minutes = args.minutes if args.minutes is not None else learn_cfg.trainer.time_budget_minutes
    phases_dir(args)
    results: dict[str, Any] = {
        "budget_minutes": args.minutes,
        "problems": args.problems,
        "machine": cpu_label(),
        "date": time.strftime("%Y-%m-%d"),
        "held_out": {},
        "trainers": {},
    }
    runs: dict[str, list[dict[str, Any]]] = {}
    for preset, path in PRESETS.items():
        base = evaluate(f"eval_base_{preset}", learn_cfg.model.path, path, args)
        results["held_out"][f"base_{preset}"] = {**held_out("base", base, 0.0), **tool_use(base)}
    for preset, path in PRESETS.items():
        run_dir = train(preset, path, args)
        runs[preset] = load_metrics(run_dir / "metrics.jsonl")
        minutes = runs[preset][-1][sm.TIME_ELAPSED] / 60
        final = evaluate(f"eval_{preset}", run_dir, path, args)
        results["held_out"][f"trained_{preset}"] = {**held_out(preset, final, minutes), **tool_use(final)}
        trained, base = results["held_out"][f"trained_{preset}"], results["held_out"][f"base_{preset}"]
        results["trainers"][preset] = trainer_summary(runs[preset], trained, base)
    tools, learn = results["held_out"]["trained_tools"], results["held_out"]["trained_learn"]
    results["tools_minus_learn"] = {key: compare(tools, learn, key) for key in ("accuracy", "format_rate")}
    n = args.problems
    for entry in results["held_out"].values():
        entry["format_rate_ci"] = list(wilson_interval(round(entry["format_rate"] * n), n))
    section = report(args, results)
    figure = plot(runs, (args.out if args.no_write else REPO_ROOT / "docs") / "tools_learning_calls.png")
    publish(
        "tools_learning",
        results,
        section,
        MARKS,
        "Learning to call a calculator",
        write=not args.no_write,
        out=args.out,
    )
    print(f"plot: {figure}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
