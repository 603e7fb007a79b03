"""Learning the carried sums: a warm start on worked sums before GRPO, against GRPO alone, on the dev split.

    python -m benchmarks.learning.carry [--config configs/arithmetic_smollm2.yaml] [--minutes 15] [--save-every 8]
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

SFT_PRESET = REPO_ROOT / "configs" / "sft_arithmetic_worked.yaml"
DEV = (f"data.generate.test_seed={DEV_TEST_SEED}",)
# Room for a worked answer: 128 tokens, the overlong penalty over the last 32 (from 96).
WORKED_LENGTH = ("data.max_response_length=128", "reward.overlong_buffer.length=32")
MARKS = ("<!-- carry:begin -->", "<!-- carry:end -->")


def warm_start(args: argparse.Namespace) -> tuple[Path, dict[str, float]]:
    """The ``sft`` phase: the worked-sums warm start in ``OUT/sft``, exported to ``OUT/sft_hf``; its export and
    its steps and minutes."""
    from relay.metrics import system as sm
    from relay.run.summarize import load_metrics

    run_dir, export = args.out / "sft", args.out / "sft_hf"
    if not export.is_dir():
        shutil.rmtree(run_dir, ignore_errors=True)
        settings = [f"trainer.output_dir={args.out}", "trainer.run_name=sft", *DEV]
        cmd = [sys.executable, "trainer.py", "--config", str(SFT_PRESET)]
        run_phase("sft", cmd + [arg for s in settings for arg in ("--set", s)], args.out)
        export_cmd = [sys.executable, "-m", "relay.checkpoint.export", str(run_dir), "--out", str(export)]
        run_phase("export_sft", export_cmd, args.out)
    rows = load_metrics(run_dir / "metrics.jsonl")
    return export, {"steps": float(len(rows)), "minutes": float(rows[-1][sm.TIME_ELAPSED]) / 60}


def grpo_arm(args: argparse.Namespace, name: str, base: CurvePoint, extra: tuple[str, ...]) -> list[CurvePoint]:
    """The preset with ``extra`` for the budget, each checkpoint evaluated with the same settings."""
    checkpoints = relay_checkpoints(train_relay(args, name, args.config, [*DEV, *extra]))
    return curve(name, checkpoints, base, args, [*DEV, *extra])


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
    sft = results["sft"]
    lines = [
        f"Reproduce: `python -m benchmarks.learning.carry --config {shown_path(args.config)} --minutes "
        f"{args.minutes:g}` ({args.problems} problems of the dev split, test_seed {DEV_TEST_SEED}; greedy; {machine}; "
        f"{time.strftime('%Y-%m-%d')}). The warm start: {sft['steps']:.0f} steps in {sft['minutes']:.1f} min; "
        f"`sft_grpo` counts them before its own {args.minutes:g}.",
    ]
    finals = results["finals"]
    for reading in READINGS:
        lines += ["", f"Final checkpoints by band ({reading}, greedy):", ""] + band_rows(finals, args.out, reading)
    for reading in READINGS:
        lines += ["", f"`sft_grpo` (B) against `grpo` (A) at their final checkpoints ({reading}):", ""]
        a, b = (responses_file(args.out, finals[arm]) for arm in ("grpo", "sft_grpo"))
        lines += paired_report(a, b, bands=True, reading=reading)
    return "\n".join([*lines, "", f"![dev-split accuracy against total minutes]({figure})"])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from benchmarks.harness.cli import add_held_out_options

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=PRESET, help="the GRPO preset both GRPO arms run")
    parser.add_argument("--minutes", type=float, default=15.0, help="each GRPO arm's budget")
    parser.add_argument("--save-every", type=int, default=8, help="the GRPO arms' checkpoint interval in steps")
    add_held_out_options(parser, "carry")
    args = parser.parse_args(argv)
    args.config = args.config.resolve()
    return args


def main(argv: list[str] | None = None) -> int:
    from benchmarks.harness.cli import cpu_label, phases_dir, run_meta

    args = parse_args(argv)
    phases_dir(args)
    base = CurvePoint.from_metrics(0, 0.0, evaluate("eval_base", "smollm2-135m", args, DEV))
    export, sft = warm_start(args)
    sft_point = CurvePoint.from_metrics(0, sft["minutes"], evaluate("eval_sft", export, args, [*DEV, *WORKED_LENGTH]))
    grpo = grpo_arm(args, "grpo", base, ())
    after = grpo_arm(args, "sft_grpo", sft_point, (f"model.path={export}", *WORKED_LENGTH))
    after = [replace(p, minutes=p.minutes + sft["minutes"]) if p.step else p for p in after]
    curves = {"grpo": grpo, "sft_grpo": [base, *after]}
    finals = {
        "base": "eval_base",
        "grpo": f"eval_grpo_step{grpo[-1].step}",
        "sft": "eval_sft",
        "sft_grpo": f"eval_sft_grpo_step{after[-1].step}",
    }
    figure_dir = args.out if args.no_write else REPO_ROOT / "docs"
    figure = curve_plot(figure_dir / "carry_dev.png", "worked-sum warm start vs GRPO alone (dev split)", curves)
    results = {
        "meta": run_meta("benchmarks.learning.carry", argv),
        "sft": sft,
        "finals": finals,
        "curves": {arm: [asdict(p) for p in points] for arm, points in curves.items()},
    }
    section = report(args, results, cpu_label(), f"docs/{figure.name}")
    title = "Learning the carried sums: a worked-sum warm start (dev split)"
    publish("carry", json.loads(json.dumps(results, default=str)), section, MARKS, title, not args.no_write, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
