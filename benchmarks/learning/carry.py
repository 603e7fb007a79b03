"""Learning the carried sums: a warm start on worked sums before GRPO, against GRPO alone, on the dev split.

    python -m benchmarks.learning.carry [--config configs/arithmetic_smollm2.yaml] [--minutes 15] [--save-every 8]
        [--split dev|test] [--sft-steps N] [--sft-save-every K] [--total-minutes T]
        [--problems 200] [--out outputs/carry] [--fresh] [--no-write]

The arithmetic preset levels off where no sample of a group is right: the sums with a carry, which the model answers
on one line and gets wrong at temperature 0.7 in every sample, so GRPO has nothing to reinforce. The field's
remedies for such zero-pass prompts are measured here, each against GRPO alone, all on the dev split
(``data.generate.test_seed`` = :data:`benchmarks.learning.race.DEV_TEST_SEED`: the split settings are chosen on,
so the preset's test split stays unread). The arms:

1. ``base``: the model as shipped;
2. ``grpo``: the preset for ``--minutes``, a checkpoint every ``--save-every`` steps;
3. ``sft``: ``configs/sft_arithmetic_worked.yaml``, its training sums worked column by column
   (:mod:`relay.sft.worked_sums`), exported;
4. ``sft_grpo``: the preset from that export for ``--minutes``, with :data:`WORKED_LENGTH` (a worked two-digit sum
   is about 70 tokens, so the preset's 64 tokens and its penalty from 32 would cut or punish every worked answer).

``--sft-steps`` shortens the warm start (``N`` steps of 16 traces, one epoch of the first ``16 N`` rows);
``--sft-save-every`` evaluates its checkpoints too, so one warm start on the dev split shows how many steps it
needs. ``--total-minutes`` holds both GRPO arms to one wall clock: ``grpo`` trains ``T`` minutes, ``sft_grpo``
``T`` less the warm start's. ``--split test`` reads the preset's own test split (once the settings are chosen on
the dev split) and reports in its own section.

Each checkpoint is evaluated greedy (``driver.evaluate --responses``) with its arm's settings. The report gives
each arm's final accuracy, strict and lenient with Wilson 95% intervals, by band of two-term sums
(:mod:`benchmarks.learning.sum_bands`), ``sft_grpo`` against ``grpo`` problem by problem at their final checkpoints
(:mod:`benchmarks.learning.paired`), and the curves against total minutes (the warm start's minutes counted before
``sft_grpo``'s). Phases done in ``OUT`` are reused; run it alone on the machine: the trainers are timed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from benchmarks.harness.publish import publish, shown_path
from benchmarks.learning.curve import READINGS, CurvePoint, curve_plot, relay_checkpoints
from benchmarks.learning.paired import outcomes
from benchmarks.learning.paired import report as paired_report
from benchmarks.learning.race import DEV_TEST_SEED
from benchmarks.learning.relay_vs_trl import PRESET, curve, evaluate, responses_file, run_phase, train_relay
from benchmarks.learning.sum_bands import BANDS, sum_band
from relay.repo import REPO_ROOT
from relay.sft.worked_sums import WORKINGS

SFT_PRESET = REPO_ROOT / "configs" / "sft_arithmetic_worked.yaml"
SFT_BATCH = 16  # the warm start's traces per step (configs/sft_arithmetic_worked.yaml's rollout.batch_size)
# --split -> the overrides that select it: the dev split by its seed, the test split as the preset has it
SPLITS = {"dev": (f"data.generate.test_seed={DEV_TEST_SEED}",), "test": ()}
# Room for a worked answer: 128 tokens, the overlong penalty over the last 32 (from 96).
WORKED_LENGTH = ("data.max_response_length=128", "reward.overlong_buffer.length=32")
DEFAULT_TRACES = "worked_sums"  # the warm start's sft.traces (configs/sft_arithmetic_worked.yaml)


def marks(split: str, sft_steps: int = 0, traces: str = DEFAULT_TRACES) -> tuple[str, str]:
    """The BENCHMARKS.md marks of the section of ``split``, ``--sft-steps`` and ``--sft-traces``
    (:func:`result_name`)."""
    name = result_name(split, sft_steps, traces)
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def result_name(split: str, sft_steps: int = 0, traces: str = DEFAULT_TRACES) -> str:
    """The record's name: ``carry`` (dev split, the preset's warm start), ``carry_test``, and with a shorter
    warm start or other traces those too, so a run of another kind keeps the others' records.

    >>> result_name("dev"), result_name("test"), result_name("dev", 30), result_name("test", 20, "worked_sums_placed")
    ('carry', 'carry_test', 'carry_sft30', 'carry_test_sft20_placed')
    """
    name = "carry" if split == "dev" else f"carry_{split}"
    return name + (f"_sft{sft_steps}" if sft_steps else "") + traces.removeprefix(DEFAULT_TRACES)


def sft_settings(args: argparse.Namespace) -> list[str]:
    """The warm start's overrides: its run directory, the split, and ``--sft-steps`` / ``--sft-save-every``."""
    settings = [f"trainer.output_dir={args.out}", "trainer.run_name=sft", *SPLITS[args.split]]
    if args.sft_traces != DEFAULT_TRACES:
        settings.append(f"sft.traces={args.sft_traces}")
    if args.sft_steps:
        settings += [f"trainer.total_training_steps={args.sft_steps}", f"sft.train_size={SFT_BATCH * args.sft_steps}"]
    if args.sft_save_every:
        settings += [f"trainer.save_freq={args.sft_save_every}", "trainer.keep_checkpoints=0"]
    return settings


def warm_start(args: argparse.Namespace) -> tuple[Path, dict[str, float]]:
    """The ``sft`` phase: the worked-sums warm start in ``OUT/sft``, exported to ``OUT/sft_hf``; its export and
    its steps and minutes."""
    from relay.metrics import system as sm
    from relay.run.summarize import load_metrics

    run_dir, export = args.out / "sft", args.out / "sft_hf"
    if not export.is_dir():
        shutil.rmtree(run_dir, ignore_errors=True)
        cmd = [sys.executable, "trainer.py", "--config", str(SFT_PRESET)]
        run_phase("sft", cmd + [arg for s in sft_settings(args) for arg in ("--set", s)], args.out)
        export_cmd = [sys.executable, "-m", "relay.checkpoint.export", str(run_dir), "--out", str(export)]
        run_phase("export_sft", export_cmd, args.out)
    rows = load_metrics(run_dir / "metrics.jsonl")
    return export, {"steps": float(len(rows)), "minutes": float(rows[-1][sm.TIME_ELAPSED]) / 60}


def sft_curve(args: argparse.Namespace, sft_point: CurvePoint, base: CurvePoint) -> list[CurvePoint]:
    """The base, the warm start's saved checkpoints (``--sft-save-every``) and its final export, evaluated alike."""
    saved = [c for c in relay_checkpoints(args.out / "sft") if c.step < sft_point.step]
    return [*curve("sft", saved, base, args, [*SPLITS[args.split], *WORKED_LENGTH]), sft_point]


def grpo_arm(
    args: argparse.Namespace, name: str, base: CurvePoint, extra: tuple[str, ...], minutes: float
) -> list[CurvePoint]:
    """The preset with ``extra`` for ``minutes``, each checkpoint evaluated with the same settings."""
    settings = [*SPLITS[args.split], *extra]
    checkpoints = relay_checkpoints(train_relay(replace_minutes(args, minutes), name, args.config, settings))
    return curve(name, checkpoints, base, args, settings)


def replace_minutes(args: argparse.Namespace, minutes: float) -> argparse.Namespace:
    return argparse.Namespace(**{**vars(args), "minutes": minutes})


def grpo_budgets(args: argparse.Namespace, sft_minutes: float) -> dict[str, float]:
    """Each GRPO arm's minutes: ``--minutes`` each, or with ``--total-minutes`` one wall clock for both, the
    warm start's minutes taken from ``sft_grpo``'s.

    >>> grpo_budgets(argparse.Namespace(minutes=15.0, total_minutes=15.0), 9.5)
    {'grpo': 15.0, 'sft_grpo': 5.5}
    """
    if not args.total_minutes:
        return {"grpo": args.minutes, "sft_grpo": args.minutes}
    left = args.total_minutes - sft_minutes
    if left <= 0:
        raise SystemExit(
            f"--total-minutes {args.total_minutes:g}: the warm start alone took {sft_minutes:.1f} min; "
            "give fewer --sft-steps or more --total-minutes"
        )
    return {"grpo": args.total_minutes, "sft_grpo": left}


def band_cells(path: Path, reading: str) -> dict[str, str]:
    """``{band: "accuracy [Wilson 95%] (n)"}`` of one evaluation's greedy answers, and ``all``."""
    from relay.evaluation.metrics import wilson_interval

    found: dict[str, list[bool]] = {}
    for question, correct in outcomes(path, 0, reading).values():
        found.setdefault("all", []).append(correct)
        found.setdefault(sum_band(question), []).append(correct)
    cells = {}
    for band, hits in found.items():
        low, high = wilson_interval(sum(hits), len(hits))
        cells[band] = f"{sum(hits) / len(hits):.3f} [{low:.2f}, {high:.2f}] (n={len(hits)})"
    return cells


def band_rows(finals: dict[str, str], out: Path, reading: str) -> list[str]:
    """Each arm's final evaluation by band (:func:`band_cells`), the base's first."""
    tables = {arm: band_cells(responses_file(out, name), reading) for arm, name in finals.items()}
    keys = ["all", *(b for b in BANDS if b in tables["base"])]
    rows = ["| arm | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
    rows += [f"| {arm} | " + " | ".join(t.get(k, "-") for k in keys) + " |" for arm, t in tables.items()]
    return rows


def report(args: argparse.Namespace, results: dict[str, Any], machine: str, figure: str) -> str:
    """The Markdown section: the warm start, each arm's bands (strict, then lenient), the paired comparison."""
    sft, budgets = results["sft"], results["budgets"]
    lines = [
        f"Reproduce: `python -m benchmarks.learning.carry {' '.join(command_options(args))}` ({args.problems} "
        f"problems of the {args.split} split, test_seed {split_seed(args)}; greedy; {machine}; "
        f"{time.strftime('%Y-%m-%d')}). The warm start: {sft['steps']:.0f} steps in {sft['minutes']:.1f} min; "
        f"`sft_grpo` counts them before its own {budgets['sft_grpo']:g}, `grpo` trains {budgets['grpo']:g}.",
    ]
    finals = results["finals"]
    for reading in READINGS:
        lines += ["", f"Final checkpoints by band ({reading}, greedy):", ""] + band_rows(finals, args.out, reading)
    for reading in READINGS:
        lines += ["", f"`sft_grpo` (B) against `grpo` (A) at their final checkpoints ({reading}):", ""]
        a, b = (responses_file(args.out, finals[arm]) for arm in ("grpo", "sft_grpo"))
        lines += paired_report(a, b, bands=True, reading=reading)
    return "\n".join([*lines, "", f"![{args.split}-split accuracy against total minutes]({figure})"])


def command_options(args: argparse.Namespace) -> list[str]:
    """The options that reproduce this run, as the report shows them."""
    shown = ["--config", shown_path(args.config), "--split", args.split]
    shown += (
        ["--total-minutes", f"{args.total_minutes:g}"] if args.total_minutes else ["--minutes", f"{args.minutes:g}"]
    )
    for option, value in (("--sft-steps", args.sft_steps), ("--sft-save-every", args.sft_save_every)):
        shown += [option, str(value)] if value else []
    shown += ["--sft-traces", args.sft_traces] if args.sft_traces != DEFAULT_TRACES else []
    return shown


def split_seed(args: argparse.Namespace) -> int:
    """The test_seed that ``--split`` reads: the dev seed, or the preset's own."""
    from relay.config import load_config

    return int(load_config(args.config, list(SPLITS[args.split]), environ={}).cfg.data.generate.test_seed)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from benchmarks.harness.cli import add_held_out_options

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=PRESET, help="the GRPO preset both GRPO arms run")
    parser.add_argument("--minutes", type=float, default=15.0, help="each GRPO arm's budget")
    parser.add_argument("--save-every", type=int, default=8, help="the GRPO arms' checkpoint interval in steps")
    parser.add_argument("--split", choices=sorted(SPLITS), default="dev", help="the held-out split read")
    parser.add_argument("--sft-steps", type=int, default=0, help="the warm start's steps (default: the preset's)")
    parser.add_argument("--sft-save-every", type=int, default=0, help="evaluate the warm start every K steps too")
    parser.add_argument("--total-minutes", type=float, default=0.0, help="both GRPO arms on one wall clock")
    parser.add_argument("--sft-traces", choices=sorted(WORKINGS), default=DEFAULT_TRACES, help="the warm start's form")
    add_held_out_options(parser, "carry")
    args = parser.parse_args(argv)
    args.config = args.config.resolve()
    return args


def same_phases(args: argparse.Namespace) -> None:
    """Record in ``OUT/settings.json`` what the cached phases were made with; refuse to mix in other settings (a
    dev-split base evaluation read as the test split's, a 100-step warm start as a 40-step one)."""
    made = {"split": args.split, "sft_steps": args.sft_steps, "sft_save_every": args.sft_save_every}
    made |= {"sft_traces": args.sft_traces} if args.sft_traces != DEFAULT_TRACES else {}
    recorded = args.out / "settings.json"
    if recorded.is_file() and (before := json.loads(recorded.read_text())) != made:
        raise SystemExit(f"{args.out} holds phases made with {before}, not {made}: give --fresh or another --out")
    recorded.write_text(json.dumps(made) + "\n")


def main(argv: list[str] | None = None) -> int:
    from benchmarks.harness.cli import cpu_label, phases_dir, run_meta

    args = parse_args(argv)
    phases_dir(args)
    same_phases(args)
    held_out = SPLITS[args.split]
    base = CurvePoint.from_metrics(0, 0.0, evaluate("eval_base", "smollm2-135m", args, held_out))
    export, sft = warm_start(args)
    sft_metrics = evaluate("eval_sft", export, args, [*held_out, *WORKED_LENGTH])
    sft_point = CurvePoint.from_metrics(int(sft["steps"]), sft["minutes"], sft_metrics)
    budgets = grpo_budgets(args, sft["minutes"])
    grpo = grpo_arm(args, "grpo", base, (), budgets["grpo"])
    start = replace(sft_point, step=0)
    after = grpo_arm(args, "sft_grpo", start, (f"model.path={export}", *WORKED_LENGTH), budgets["sft_grpo"])
    after = [replace(p, minutes=p.minutes + sft["minutes"]) if p.step else p for p in after]
    curves = {"grpo": grpo, "sft": sft_curve(args, sft_point, base), "sft_grpo": [base, *after]}
    finals = {
        "base": "eval_base",
        "grpo": f"eval_grpo_step{grpo[-1].step}",
        "sft": "eval_sft",
        "sft_grpo": f"eval_sft_grpo_step{after[-1].step}",
    }
    figure_dir = args.out if args.no_write else REPO_ROOT / "docs"
    title = f"worked-sum warm start vs GRPO alone ({args.split} split)"
    name = result_name(args.split, args.sft_steps, args.sft_traces)
    figure_name = f"carry_{args.split}{name.removeprefix(result_name(args.split))}.png"
    figure = curve_plot(figure_dir / figure_name, title, curves)
    results = {
        "meta": run_meta("benchmarks.learning.carry", argv),
        "sft": sft,
        "budgets": budgets,
        "finals": finals,
        "curves": {arm: [asdict(p) for p in points] for arm, points in curves.items()},
    }
    section = report(args, results, cpu_label(), f"docs/{figure.name}")
    steps = f"{args.sft_steps}-step " if args.sft_steps else ""
    form = ", digits placed first" if args.sft_traces == "worked_sums_placed" else ""
    title = f"Learning the carried sums: a {steps}worked-sum warm start{form} ({args.split} split)"
    record = json.loads(json.dumps(results, default=str))
    marked = marks(args.split, args.sft_steps, args.sft_traces)
    publish(name, record, section, marked, title, not args.no_write, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
