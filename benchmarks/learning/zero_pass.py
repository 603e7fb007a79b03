"""Zero-pass prompts sampled again: the group filter's retry of unsolved prompts, and their revisit in later steps,
against GRPO alone, on the dev split.

    python -m benchmarks.learning.zero_pass [--config configs/arithmetic_smollm2.yaml] [--minutes 15]
        [--arms grpo,retry,retry_hot,revisit,revisit_recent] [--retry-temperature 1.0] [--save-every 8]
        [--split dev|test] [--problems 200] [--out outputs/zero_pass] [--fresh] [--no-write] [--name zero_pass]

A prompt none of whose ``rollout.n`` samples is right gives GRPO nothing to reinforce, and the group filter drops
it and draws a new prompt instead: the problems the policy cannot yet sample right are never learned. With
``algorithm.filter_groups.retry_unsolved`` the filter's first extra pass samples the step's unsolved prompts once
more before it draws new ones (:mod:`driver.dynamic_sampling`); with ``data.revisit_unsolved`` they come back in a
later step's draw, after the policy has moved (:mod:`relay.data.revisit`). The arms, each the preset for
``--minutes`` with a checkpoint every ``--save-every`` steps, one after the other on the same split:

- ``grpo``: the preset as shipped;
- ``retry``: unsolved prompts retried at the rollout's temperature (``n`` more samples each);
- ``retry_hot``: retried at ``--retry-temperature`` (more varied samples);
- ``revisit``: unsolved prompts revisited in later steps (``data.revisit_unsolved`` at its defaults);
- ``revisit_recent``: the latest unsolved prompts revisited first, from a queue of at most 16 (``newest_first``,
  ``capacity: 16``): with a delay of 4 draws nothing comes back while 6 or more prompts a step are unsolved.

Each checkpoint is evaluated greedy (``driver.evaluate --responses``). The report gives each arm's final accuracy by
band of two-term sums (:mod:`benchmarks.learning.sum_bands`) with Wilson 95% intervals, each remedy against ``grpo``
problem by problem at their final checkpoints (:mod:`benchmarks.learning.paired`), what the retries and revisits did
in training (``filter/retried_prompts``, ``filter/retries_solved``, ``data/revisited`` per step), and the curves
against minutes. Settings are chosen on the dev split (``--split dev``, the default); ``--split test`` reads the
preset's own test split. Phases done in ``OUT`` are reused; run it alone on the machine: the trainers are timed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.harness.publish import publish, shown_path
from benchmarks.learning.carry import SPLITS, band_rows, grpo_arm, split_seed
from benchmarks.learning.curve import READINGS, CurvePoint, curve_plot
from benchmarks.learning.paired import report as paired_report
from benchmarks.learning.relay_vs_trl import PRESET, evaluate, responses_file
from relay.metrics import outcomes as om
from relay.repo import REPO_ROOT

RETRY = "algorithm.filter_groups.retry_unsolved"
REFERENCE = "grpo"


def arm_overrides(arm: str, retry_temperature: float) -> tuple[str, ...]:
    """The overrides of ``arm`` on top of the preset.

    >>> arm_overrides("retry_hot", 1.0)
    ('algorithm.filter_groups.retry_unsolved.enable=true', 'algorithm.filter_groups.retry_unsolved.temperature=1.0')
    """
    arms = {
        "grpo": (),
        "retry": (f"{RETRY}.enable=true",),
        "retry_hot": (f"{RETRY}.enable=true", f"{RETRY}.temperature={float(retry_temperature)!r}"),
        "revisit": ("data.revisit_unsolved.enable=true",),
        "revisit_recent": (
            "data.revisit_unsolved.enable=true",
            "data.revisit_unsolved.newest_first=true",
            "data.revisit_unsolved.capacity=16",
        ),
    }
    if arm not in arms:
        raise SystemExit(f"--arms: unknown arm {arm!r}; the arms are {', '.join(arms)}")
    return arms[arm]


def retry_summary(run_dir: Path) -> dict[str, float]:
    """What a run's steps sampled: steps, and per step the retried prompts, those a retry solved, the prompts
    revisited from earlier steps and those of them solved, and the groups kept with signal (``filter/*``,
    ``data/revisited``, ``data/revisits_solved``; 0 where the run had no retry or revisit)."""
    from relay.run.summarize import load_metrics

    rows = load_metrics(run_dir / "metrics.jsonl")

    def mean(key: str) -> float:
        return sum(float(r.get(key, 0.0)) for r in rows) / max(len(rows), 1)

    return {
        "steps": float(len(rows)),
        "retried_per_step": mean(om.FILTER_RETRIED_PROMPTS),
        "retries_solved_per_step": mean(om.FILTER_RETRIES_SOLVED),
        "revisited_per_step": mean(om.DATA_REVISITED),
        "revisits_solved_per_step": mean(om.DATA_REVISITS_SOLVED),
        "groups_kept_per_step": mean(om.FILTER_GROUPS_KEPT),
        "extra_passes_per_step": mean(om.FILTER_EXTRA_PASSES),
    }


def training_rows(summaries: dict[str, dict[str, float]]) -> list[str]:
    """The Markdown table of :func:`retry_summary` per arm."""
    rows = [
        "| arm | steps | retried / step | solved by the retry / step | revisited / step | revisits solved / step "
        "| groups kept / step | extra passes / step |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for arm, s in summaries.items():
        rows.append(
            f"| {arm} | {s['steps']:.0f} | {s['retried_per_step']:.2f} | {s['retries_solved_per_step']:.2f} | "
            f"{s['revisited_per_step']:.2f} | {s['revisits_solved_per_step']:.2f} | "
            f"{s['groups_kept_per_step']:.2f} | {s['extra_passes_per_step']:.2f} |"
        )
    return rows


def report(args: argparse.Namespace, results: dict[str, Any], machine: str, figure: str) -> str:
    """The Markdown section: the arms' training, their final bands (strict, then lenient), each remedy against
    ``grpo`` problem by problem."""
    finals = results["finals"]
    lines = [
        f"Reproduce: `python -m benchmarks.learning.zero_pass {' '.join(command_options(args))}` ({args.problems} "
        f"problems of the {args.split} split, test_seed {split_seed(args)}; greedy; {machine}; "
        f"{time.strftime('%Y-%m-%d')}). Each arm trains {args.minutes:g} minutes, one after the other.",
        "",
        *training_rows(results["training"]),
    ]
    for reading in READINGS:
        lines += ["", f"Final checkpoints by band ({reading}, greedy):", ""] + band_rows(finals, args.out, reading)
    for arm in (a for a in finals if a not in ("base", REFERENCE)):
        for reading in READINGS:
            lines += ["", f"`{arm}` (B) against `{REFERENCE}` (A) at their final checkpoints ({reading}):", ""]
            a, b = (responses_file(args.out, finals[name]) for name in (REFERENCE, arm))
            lines += paired_report(a, b, bands=True, reading=reading)
    return "\n".join([*lines, "", f"![{args.split}-split accuracy against minutes]({figure})"])


def command_options(args: argparse.Namespace) -> list[str]:
    """The options that reproduce this run, as the report shows them."""
    shown = ["--config", shown_path(args.config), "--split", args.split, "--minutes", f"{args.minutes:g}"]
    shown += ["--arms", ",".join(args.arms), "--retry-temperature", f"{args.retry_temperature:g}"]
    return shown + (["--name", args.name] if args.name != default_name(args.split) else [])


def default_name(split: str) -> str:
    """The name a run on ``split`` publishes under unless ``--name`` gives another: its results JSON, figure and
    BENCHMARKS.md marks."""
    return "zero_pass" if split == "dev" else f"zero_pass_{split}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from benchmarks.harness.cli import add_held_out_options

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=PRESET, help="the GRPO preset every arm runs")
    parser.add_argument("--minutes", type=float, default=15.0, help="each arm's budget")
    parser.add_argument("--arms", default="grpo,retry,retry_hot", help="comma-separated, grpo first")
    parser.add_argument("--retry-temperature", type=float, default=1.0, help="retry_hot's retry temperature")
    parser.add_argument("--save-every", type=int, default=8, help="the checkpoint interval in steps")
    parser.add_argument("--split", choices=sorted(SPLITS), default="dev", help="the held-out split read")
    parser.add_argument("--name", default=None, help="publish under this name (default zero_pass[_<split>])")
    add_held_out_options(parser, "zero_pass")
    args = parser.parse_args(argv)
    args.name = args.name or default_name(args.split)
    args.config = args.config.resolve()
    args.arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if not args.arms or args.arms[0] != REFERENCE:
        parser.error(
            f"--arms {','.join(args.arms)}: the first arm must be {REFERENCE} (the others are read against it)"
        )
    for arm in args.arms:
        arm_overrides(arm, args.retry_temperature)  # an unknown arm exits here, before any phase runs
    return args


def main(argv: list[str] | None = None) -> int:
    from benchmarks.harness.cli import cpu_label, phases_dir, run_meta

    args = parse_args(argv)
    phases_dir(args)
    base = CurvePoint.from_metrics(0, 0.0, evaluate("eval_base", "smollm2-135m", args, SPLITS[args.split]))
    curves = {
        arm: grpo_arm(args, arm, base, arm_overrides(arm, args.retry_temperature), args.minutes) for arm in args.arms
    }
    finals = {"base": "eval_base", **{arm: f"eval_{arm}_step{c[-1].step}" for arm, c in curves.items()}}
    figure_dir = args.out if args.no_write else REPO_ROOT / "docs"
    name = args.name
    plot_title = f"unsolved prompts sampled again vs GRPO alone ({args.split})"
    figure = curve_plot(figure_dir / f"{name}.png", plot_title, curves)
    results = {
        "meta": run_meta("benchmarks.learning.zero_pass", argv),
        "finals": finals,
        "training": {arm: retry_summary(args.out / arm) for arm in args.arms},
        "curves": {arm: [asdict(p) for p in points] for arm, points in curves.items()},
    }
    section = report(args, results, cpu_label(), f"docs/{figure.name}")
    title = f"Unsolved prompts sampled again ({args.split} split)"
    marks = (f"<!-- {name}:begin -->", f"<!-- {name}:end -->")
    publish(name, json.loads(json.dumps(results, default=str)), section, marks, title, not args.no_write, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
