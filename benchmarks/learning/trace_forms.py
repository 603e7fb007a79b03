"""Which worked-sum form a short warm start learns the sums from: each ``sft.traces`` form trained the same steps on
the same rows, evaluated alike on the dev split, each paired against the first form problem by problem.

    python -m benchmarks.learning.trace_forms [--forms worked_sums,worked_sums_placed] [--sft-steps 20]
        [--problems 200] [--out outputs/trace_forms] [--fresh] [--no-write]

A form is one of :data:`relay.sft.worked_sums.WORKINGS`: ``worked_sums`` works a sum column by column from the
question; ``worked_sums_placed`` first names each term's digits by column. Each form's warm start is
``configs/sft_arithmetic_worked.yaml`` for ``--sft-steps`` steps of 16 traces (the same first ``16 N`` training rows,
the same seed: only the traces' text differs), exported, then evaluated greedy (``driver.evaluate --responses``)
with room for a worked answer (:data:`benchmarks.learning.carry.WORKED_LENGTH`). The base model is evaluated once.
The form is a setting, so only the dev split is read (:data:`benchmarks.learning.race.DEV_TEST_SEED`).
The report gives each form's accuracy by band of two-term sums, strict and lenient with Wilson 95% intervals, and
each later form against the first on the same problems (the paired difference with its bootstrap interval and the
exact McNemar p-value). The warm starts are timed and run one after the other: run it alone on the machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.publish import publish, shown_path
from benchmarks.learning.carry import SPLITS, WORKED_LENGTH, band_rows, same_phases, split_seed, warm_start
from benchmarks.learning.curve import READINGS
from benchmarks.learning.paired import report as paired_report
from benchmarks.learning.relay_vs_trl import PRESET, evaluate, responses_file
from relay.sft.worked_sums import WORKINGS

RESULT_NAME = "trace_forms"
MARKS = (f"<!-- {RESULT_NAME}:begin -->", f"<!-- {RESULT_NAME}:end -->")
TITLE = "Which worked-sum form a short warm start learns from (dev split)"


def form_args(args: argparse.Namespace, form: str) -> argparse.Namespace:
    """The warm start's options for ``form``: its own phase folder ``OUT/<form>``, no intermediate saves.

    >>> form_args(argparse.Namespace(out=Path("o"), sft_save_every=10), "worked_sums_placed").out
    PosixPath('o/worked_sums_placed')
    """
    return argparse.Namespace(**{**vars(args), "out": args.out / form, "sft_traces": form, "sft_save_every": 0})


def train_forms(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Each form's warm start, export and evaluation (``OUT/eval_<form>``); each form's steps and minutes."""
    runs = {}
    for form in args.forms:
        options = form_args(args, form)
        options.out.mkdir(exist_ok=True)
        same_phases(options)  # a warm start of other steps in OUT/<form> is refused, not reused
        export, runs[form] = warm_start(options)
        evaluate(f"eval_{form}", export, args, [*SPLITS[args.split], *WORKED_LENGTH])
    return runs


def report(args: argparse.Namespace, runs: dict[str, dict[str, float]], machine: str) -> str:
    """The Markdown section: the command, each form's bands (strict, then lenient), each later form against the
    first."""
    timings = "; ".join(f"`{form}` {run['steps']:.0f} steps in {run['minutes']:.1f} min" for form, run in runs.items())
    lines = [
        f"Reproduce: `python -m benchmarks.learning.trace_forms {' '.join(command_options(args))}` ({args.problems} "
        f"problems of the {args.split} split, test_seed {split_seed(args)}; greedy; {machine}; "
        f"{time.strftime('%Y-%m-%d')}). The warm starts: {timings}.",
    ]
    finals = {"base": "eval_base", **{form: f"eval_{form}" for form in args.forms}}
    for reading in READINGS:
        lines += ["", f"Each form's warm start by band ({reading}, greedy):", ""] + band_rows(finals, args.out, reading)
    first = args.forms[0]
    for form in args.forms[1:]:
        for reading in READINGS:
            lines += ["", f"`{form}` (B) against `{first}` (A) ({reading}):", ""]
            a, b = (responses_file(args.out, finals[name]) for name in (first, form))
            lines += paired_report(a, b, bands=True, reading=reading)
    return "\n".join(lines)


def command_options(args: argparse.Namespace) -> list[str]:
    """The options that reproduce this run, as the report shows them."""
    shown = ["--config", shown_path(args.config), "--sft-steps", str(args.sft_steps)]
    return [*shown, "--forms", ",".join(args.forms)]


def parse_forms(text: str) -> list[str]:
    """``--forms``: two or more of :data:`WORKINGS`, comma-separated, the first the one the others are paired
    against.

    >>> parse_forms("worked_sums,worked_sums_placed")
    ['worked_sums', 'worked_sums_placed']
    """
    forms = [form.strip() for form in text.split(",") if form.strip()]
    unknown = [form for form in forms if form not in WORKINGS]
    if unknown or len(set(forms)) < 2:
        raise argparse.ArgumentTypeError(
            f"--forms {text}: give two or more distinct forms of {', '.join(sorted(WORKINGS))}"
            + (f" (unknown: {', '.join(unknown)})" if unknown else "")
        )
    return forms


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from benchmarks.harness.cli import add_held_out_options

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=PRESET, help="the GRPO preset whose rows and grader are read")
    parser.add_argument("--forms", type=parse_forms, default=parse_forms(",".join(WORKINGS)), help="sft.traces forms")
    parser.add_argument("--sft-steps", type=int, default=20, help="each warm start's steps (16 traces a step)")
    add_held_out_options(parser, RESULT_NAME)
    args = parser.parse_args(argv)
    args.config, args.split = args.config.resolve(), "dev"
    if args.sft_steps < 1:
        parser.error(f"--sft-steps {args.sft_steps}: give the warm start's steps, 1 or more")
    return args


def main(argv: list[str] | None = None) -> int:
    from benchmarks.harness.cli import cpu_label, phases_dir, run_meta

    args = parse_args(argv)
    phases_dir(args)
    evaluate("eval_base", "smollm2-135m", args, SPLITS[args.split])
    runs = train_forms(args)
    record: dict[str, Any] = {"meta": run_meta("benchmarks.learning.trace_forms", argv), "warm_starts": runs}
    publish(RESULT_NAME, record, report(args, runs, cpu_label()), MARKS, TITLE, not args.no_write, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
