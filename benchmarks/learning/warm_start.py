"""Does a supervised warm start make GRPO move GSM8K accuracy? Four arms on the same held-out problems.

    python -m benchmarks.learning.warm_start [--sft-minutes 30] [--grpo-minutes 10] [--problems 200]
        [--out outputs/warm_start] [--fresh] [--no-write]

Every arm is evaluated by ``python -m driver.evaluate``, greedy, on the first ``--problems`` GSM8K test problems:
the tool arms with ``configs/gsm8k_smollm2_tools_warm.yaml`` (the calculator available, 320 tokens, 6 turns), the
plain arms with ``configs/gsm8k_smollm2_learn.yaml`` (128 tokens, no tool).

1. ``base``: SmolLM2-135M-Instruct as shipped, under both settings.
2. ``sft_tools``: ``configs/sft_gsm8k_tools.yaml`` for ``--sft-minutes`` (its first ``steps x 16`` calculator
   traces, one pass, in file order), exported to HF.
3. ``grpo_tools``: ``configs/gsm8k_smollm2_tools_warm.yaml`` from that export for ``--grpo-minutes``.
4. ``sft_plain`` -> ``grpo_learn``: the same warm start on the plain chain-of-thought traces (``sft.traces=
   gsm8k_plain`` with the learning preset's prompt; 256 tokens hold 99.5% of them), then
   ``configs/gsm8k_smollm2_learn.yaml`` from its export with the warm tools preset's reward (a right answer only:
   no format score, no overlong penalty), for the same minutes.

The report gives each arm's accuracy and format rate with 95% Wilson intervals, its tool use (the share of answers
that called, calls per answer, the share of calls that parse), the differences that answer the question (with
Newcombe intervals), a plot (``docs/warm_start_accuracy.png``), the section between the ``warm-start`` markers of
BENCHMARKS.md and ``benchmarks/results/warm_start.json``. A phase whose output already exists in ``OUT`` is reused
(``--fresh`` clears ``OUT``). Run it alone on the machine: the trainers run on a time budget.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.cli import add_held_out_options, cpu_label, phases_dir
from benchmarks.harness.publish import publish
from benchmarks.learning.relay_vs_trl import compare, difference_lines, held_out, run_phase
from relay.metrics import outcomes as om
from relay.metrics import policy as pm
from relay.metrics import system as sm
from relay.metrics import validation as vm
from relay.repo import REPO_ROOT

CONFIGS = REPO_ROOT / "configs"
SFT = CONFIGS / "sft_gsm8k_tools.yaml"
TOOLS = CONFIGS / "gsm8k_smollm2_tools_warm.yaml"
LEARN = CONFIGS / "gsm8k_smollm2_learn.yaml"
PLAIN_SFT = ["sft.traces=gsm8k_plain", "data.prompt_template=concise", "data.max_response_length=256"]
# the warm tools preset's reward (a right answer only) for the learning preset after a plain warm start
PLAIN_GRPO = ["reward.format_score=0", "reward.overlong_buffer.enable=false"]
PROVENANCE = "provenance.json"  # in OUT: the commit its phases ran at and the minutes spent
MARKS = ("<!-- warm-start:begin -->", "<!-- warm-start:end -->")
# (row name, what it is, the evaluation preset), in the table's order
ARMS = (
    ("base_tools", "base, calculator available", TOOLS),
    ("base_learn", "base, no tool", LEARN),
    ("sft_tools", "SFT (calculator traces)", TOOLS),
    ("grpo_tools", "SFT (calculator traces) → GRPO tools", TOOLS),
    ("sft_plain", "SFT (plain CoT)", LEARN),
    ("grpo_learn", "SFT (plain CoT) → GRPO learn", LEARN),
)
# each arm's training runs, in order (the base arms have none)
STAGES = {
    "sft_tools": ("sft_tools",),
    "grpo_tools": ("sft_tools", "grpo_tools"),
    "sft_plain": ("sft_plain",),
    "grpo_learn": ("sft_plain", "grpo_learn"),
}


def evaluate(name: str, checkpoint: Path | str, preset: Path, args: argparse.Namespace) -> dict[str, float]:
    """Greedy held-out evaluation of ``checkpoint`` with ``preset``'s settings; cached in ``OUT/eval_<name>.json``."""
    result = args.out / f"eval_{name}.json"
    if not result.is_file():
        cmd = [sys.executable, "-m", "driver.evaluate", "--checkpoint", str(checkpoint), "--config", str(preset)]
        cmd += ["--samples", str(args.problems), "--k", "0", "--out", str(result)]
        run_phase(f"eval_{name}", cmd, args.out)
    return json.loads(result.read_text())


def train(name: str, preset: Path, minutes: float, overrides: list[str], args: argparse.Namespace) -> Path:
    """``trainer.py`` with ``preset`` for ``minutes``, exported to ``OUT/<name>_hf``; reused when that exists."""
    run_dir, export = args.out / name, args.out / f"{name}_hf"
    if not export.is_dir():
        shutil.rmtree(run_dir, ignore_errors=True)
        cmd = [sys.executable, "trainer.py", "--config", str(preset), "--set", f"trainer.output_dir={args.out}"]
        settings = [f"trainer.run_name={name}", f"trainer.time_budget_minutes={minutes}", *overrides]
        cmd += [arg for setting in settings for arg in ("--set", setting)]
        run_phase(name, cmd, args.out)
        run_phase(
            f"export_{name}",
            [sys.executable, "-m", "relay.checkpoint.export", str(run_dir), "--out", str(export)],
            args.out,
        )
    return export


def arm_figures(metrics: dict[str, float], minutes: float) -> dict[str, Any]:
    """:func:`benchmarks.learning.relay_vs_trl.held_out` plus tool use: the share of answers that called, calls per
    answer and the share of calls that parse (None without calls)."""
    return {
        **held_out("", metrics, minutes),
        "tool_call_rate": metrics.get(vm.VAL_TOOL_CALL_RATE),
        "calls_per_answer": metrics.get(vm.VAL_TOOL_CALLS_PER_RESPONSE),
        "call_parse_rate": metrics.get(vm.VAL_TOOL_CALL_PARSE_RATE),
    }


def run_summary(run_dir: Path) -> dict[str, Any]:
    """A training run's steps, minutes, prompts (traces) a step, and first/last training loss or reward (from its
    ``metrics.jsonl`` and ``config.yaml``)."""
    from omegaconf import OmegaConf

    from relay.run.summarize import load_metrics

    rows = load_metrics(run_dir / "metrics.jsonl")
    config = run_dir / "config.yaml"
    batch = OmegaConf.load(config).rollout.batch_size if config.is_file() else None
    key = om.REWARD_MEAN if om.REWARD_MEAN in rows[0] else pm.ACTOR_LOSS
    first, last = rows[: max(1, len(rows) // 5)], rows[-max(1, len(rows) // 5) :]
    mean = lambda part: sum(r.get(key, 0.0) for r in part) / len(part)  # noqa: E731
    val_loss = next((r[vm.VAL_LOSS] for r in reversed(rows) if vm.VAL_LOSS in r), None)
    return {
        "steps": len(rows),
        "batch": batch,
        "minutes": rows[-1][sm.TIME_ELAPSED] / 60,
        "curve": key,
        "first_fifth": mean(first),
        "last_fifth": mean(last),
        "val_loss": val_loss,
    }


def _rate(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def report(results: dict[str, Any]) -> str:
    """The Markdown section of BENCHMARKS.md: the arms' held-out figures, their training and the differences."""
    runs = results["runs"]
    lines = [
        f"Reproduce: `python -m benchmarks.learning.warm_start --sft-minutes {results['sft_minutes']:g} --grpo-minutes "
        f"{results['grpo_minutes']:g}` ({results['problems']} GSM8K test problems, greedy; {results['machine']}; "
        f"{results['date']}; commit `{results['commit']}`; {results['total_minutes']:.0f} minutes in all).",
        "",
        "| arm | training | held-out accuracy [95% CI] | format rate | answers that called | calls per answer | "
        "calls that parse | cut at the limit |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for name, label, _ in ARMS:
        e = results["held_out"][name]
        lo, hi = e["accuracy_ci"]
        lines.append(
            f"| {label} | {_training(name, runs)} | {e['accuracy']:.3f} [{lo:.3f}, {hi:.3f}] | "
            f"{e['format_rate']:.2f} | "
            f"{_rate(e['tool_call_rate'])} | {_rate(e['calls_per_answer'])} | {_rate(e['call_parse_rate'])} | "
            f"{_rate(e['truncated'])} |"
        )
    for label, diffs in results["differences"].items():
        lines += difference_lines(label, diffs)
    lines += ["", "![held-out accuracy of each arm](docs/warm_start_accuracy.png)"]
    return "\n".join(lines)


def _training(name: str, runs: dict[str, Any]) -> str:
    """The training column: each stage's steps and minutes (SFT also its traces), '–' for the base model."""
    parts = []
    for stage in STAGES.get(name, ()):
        r = runs[stage]
        traces = f", {r['steps'] * r['batch']} traces" if stage.startswith("sft") and r.get("batch") else ""
        parts.append(
            f"{'SFT' if stage.startswith('sft') else 'GRPO'} {r['steps']} steps{traces}, {r['minutes']:.0f} min"
        )
    return " + ".join(parts) or "–"


def plot(results: dict[str, Any], path: Path) -> Path:
    """Held-out accuracy of each arm with its 95% interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [label.replace(" → ", "\n→ ") for _, label, _ in ARMS]
    acc = [results["held_out"][name]["accuracy"] for name, _, _ in ARMS]
    low = [a - results["held_out"][name]["accuracy_ci"][0] for a, (name, _, _) in zip(acc, ARMS, strict=True)]
    high = [results["held_out"][name]["accuracy_ci"][1] - a for a, (name, _, _) in zip(acc, ARMS, strict=True)]
    fig, ax = plt.subplots(figsize=(10, 4.2))
    ax.bar(range(len(acc)), acc, yerr=[low, high], capsize=4, color=["#999", "#999", "#6a9", "#2a7", "#9ad", "#38c"])
    ax.set_xticks(range(len(acc)), labels, fontsize=8)
    ax.set_ylabel(f"held-out accuracy ({results['problems']} problems, greedy)")
    ax.set_title("SmolLM2-135M on GSM8K: warm start, then GRPO (95% Wilson intervals)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    from relay.config import load_config

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sft-minutes", type=float, default=30.0, help="budget of each warm start")
    parser.add_argument("--grpo-minutes", type=float, default=10.0, help="budget of each GRPO run")
    add_held_out_options(parser, "warm_start")
    args = parser.parse_args(argv)
    phases_dir(args)
    start, started = time.perf_counter(), provenance(args.out)
    base = load_config(LEARN, []).cfg.model.path
    sft_tools = train("sft_tools", SFT, args.sft_minutes, [], args)
    evaluated = {
        "base_tools": evaluate("base_tools", base, TOOLS, args),
        "sft_tools": evaluate("sft_tools", sft_tools, TOOLS, args),
    }
    grpo_tools = train("grpo_tools", TOOLS, args.grpo_minutes, [f"model.path={sft_tools}"], args)
    evaluated["grpo_tools"] = evaluate("grpo_tools", grpo_tools, TOOLS, args)
    sft_plain = train("sft_plain", SFT, args.sft_minutes, PLAIN_SFT, args)
    grpo_learn = train("grpo_learn", LEARN, args.grpo_minutes, [f"model.path={sft_plain}", *PLAIN_GRPO], args)
    evaluated["grpo_learn"] = evaluate("grpo_learn", grpo_learn, LEARN, args)
    evaluated["sft_plain"] = evaluate("sft_plain", sft_plain, LEARN, args)
    evaluated["base_learn"] = evaluate("base_learn", base, LEARN, args)
    runs = {name: run_summary(args.out / name) for name in ("sft_tools", "grpo_tools", "sft_plain", "grpo_learn")}
    started["minutes"] += (time.perf_counter() - start) / 60
    (args.out / PROVENANCE).write_text(json.dumps(started))
    results = collect(args, evaluated, runs, started)
    section = report(results)
    figure = plot(results, (args.out if args.no_write else REPO_ROOT / "docs") / "warm_start_accuracy.png")
    publish("warm_start", results, section, MARKS, "A warm start, then GRPO", write=not args.no_write, out=args.out)
    print(f"plot: {figure}", file=sys.stderr)
    return 0


def provenance(out: Path) -> dict[str, Any]:
    """``OUT``'s commit (where its first phase ran) and the minutes its invocations have spent so far: a rerun that
    reuses every phase reports the runs' commit and time, not its own."""
    path = out / PROVENANCE
    if not path.is_file():
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True)
        path.write_text(json.dumps({"commit": commit.stdout.strip() or "unknown", "minutes": 0.0}))
    return json.loads(path.read_text())


def collect(
    args: argparse.Namespace, evaluated: dict[str, dict[str, float]], runs: dict[str, Any], started: dict[str, Any]
) -> dict[str, Any]:
    """The results file: machine, commit, budgets, each arm's figures, each run's summary and the differences."""
    held = {
        name: arm_figures(evaluated[name], sum(runs[s]["minutes"] for s in STAGES.get(name, ()))) for name, _, _ in ARMS
    }
    pairs = {
        "SFT (calculator traces) − base (calculator available)": ("sft_tools", "base_tools"),
        "SFT (plain CoT) − base (no tool)": ("sft_plain", "base_learn"),
        "SFT → GRPO tools − base (calculator available)": ("grpo_tools", "base_tools"),
        "SFT → GRPO tools − SFT (calculator traces)": ("grpo_tools", "sft_tools"),
        "SFT → GRPO tools − SFT (plain CoT) → GRPO learn": ("grpo_tools", "grpo_learn"),
        "SFT (plain CoT) → GRPO learn − base (no tool)": ("grpo_learn", "base_learn"),
    }
    return {
        "machine": cpu_label(),
        "date": time.strftime("%Y-%m-%d"),
        "commit": started["commit"],
        "problems": args.problems,
        "sft_minutes": args.sft_minutes,
        "grpo_minutes": args.grpo_minutes,
        "total_minutes": started["minutes"],
        "held_out": held,
        "runs": runs,
        "differences": {label: {"accuracy": compare(held[a], held[b], "accuracy")} for label, (a, b) in pairs.items()},
    }


if __name__ == "__main__":
    sys.exit(main())
