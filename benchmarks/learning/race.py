"""The learning race that separates the framework from the algorithm and the engine: arms x seeds, problem by problem.

    python -m benchmarks.learning.race [--config configs/arithmetic_smollm2.yaml]
        [--arms relay,relay_nofilter,trl,trl_vllm] [--seeds 1,2,3] [--minutes M] [--save-every 8] [--trl-save-minutes 3]
        [--curriculum CONFIG] [--reference trl] [--problems 200] [--dev] [--records DIR] [--recorded-only]
        [--keep-weights] [--out outputs/race] [--fresh] [--no-write]

Each arm (:mod:`benchmarks.learning.race_arms`) trains once per seed (``trainer.seed``, which TRL's arm takes as its
seed) for the same wall-clock budget, and each checkpoint is evaluated greedy on the preset's held-out problems
(``driver.evaluate --responses``: every problem's answer kept). The base model is evaluated once. The report:

1. what differs between the arms (everything else is shared);
2. each arm's held-out accuracy by minute: the mean over seeds and the lowest and highest seed;
3. the target, the reference arm's (``--reference``, TRL's unless told) mean accuracy at the end of its budget,
   and each arm's minutes to reach it per seed with the ratio to the reference's minutes in the same seed
   (:mod:`benchmarks.learning.race_seeds`);
4. each arm against the reference at matched minutes, seed by seed, on the same problems: the paired difference
   with its bootstrap interval and the exact McNemar p-value (:mod:`benchmarks.learning.paired`);
5. each arm's final accuracy by band of two-term sums (:mod:`benchmarks.learning.sum_bands`) and by the larger term's
   digits (what a hard level holds), beside the base's;
6. the figure: accuracy against minutes, one line per arm with its seeds' range as a band, the base as a line.

Each run is recorded in the repository once done (:mod:`benchmarks.learning.race_records`), and a recorded run is
read back instead of trained, so the race's arms and seeds can be run a few at a time and reported together;
``--recorded-only`` reports what is recorded and runs nothing (an arm's seeds not yet run are left out, and each
table names the seeds it reads). Once a run is recorded its checkpoints' weights are deleted from ``OUT``, unless
``--keep-weights``: the record holds every evaluation the race reads, and SmolLM2-135M's weights with its optimizer
state take 2.1 GB a checkpoint, five of them in a 30-minute run.

``--curriculum CONFIG --arms relay,relay_curriculum --reference relay`` races a curriculum to the preset's level
against training on that level directly: both arms are judged on the preset's held-out problems, the curriculum's
last level being the preset's task.

``--dev`` trains and evaluates on the dev split instead (``data.generate.test_seed`` = :data:`DEV_TEST_SEED`: the
problems settings are chosen on); the reported race uses the preset's own test split, read by no tuning. An arm
that cannot run here (its phase fails) is reported with its error and the race goes on. Phases already done in
``OUT`` are reused. Run it alone on the machine: the trainers are timed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmarks.harness.publish import publish, shown_path
from benchmarks.learning.curve import READINGS, CurvePoint, relay_checkpoints, trl_checkpoints
from benchmarks.learning.race_arms import (
    ARMS,
    DEFAULT_ARMS,
    REFERENCE_ARM,
    Arm,
    arms_named,
    check_curriculum,
    difference_rows,
)
from benchmarks.learning.race_records import RECORDS, load_base, load_run, race_key, save_base, save_run
from benchmarks.learning.race_seeds import nearest_checkpoint, paired_at, spread_at, target, time_to_target
from benchmarks.learning.relay_vs_trl import (
    PRESET,
    curve,
    evaluate,
    preset_name,
    preset_with_budget,
    responses_file,
    train_relay,
    train_trl,
)
from benchmarks.learning.sum_bands import BANDS, largest_term_digits, sum_band
from relay.repo import REPO_ROOT

# The dev split: validation rows of this seed (far from the preset's training seed and its test seed).
DEV_TEST_SEED = 2_000_001


@dataclass
class ArmSeed:
    """One arm's run in one seed: its curve (base first) and each point's evaluation name, or the error."""

    arm: str
    seed: int
    curve: list[CurvePoint] = field(default_factory=list)
    evaluations: dict[int, str] = field(default_factory=dict)  # checkpoint step -> evaluation name
    error: str | None = None


def run_arm(args: argparse.Namespace, arm: Arm, seed: int, base: CurvePoint) -> ArmSeed:
    """Train ``arm`` in ``seed`` and evaluate its checkpoints; a failed phase is kept as the result's error."""
    name, split = f"{arm.name}_seed{seed}", dev_split(args)
    extra = [*arm.overrides, f"trainer.seed={seed}", *split]
    try:
        if arm.trainer == "relay":
            config = args.curriculum if arm.curriculum else args.config
            checkpoints = relay_checkpoints(train_relay(args, name, config, extra))
        else:
            marks = [m * args.trl_save_minutes for m in range(1, int(args.minutes / args.trl_save_minutes) + 1)]
            checkpoints = trl_checkpoints(train_trl(args, marks, name, extra, arm.trl_vllm))
        points = curve(name, checkpoints, base, args, split)
    except SystemExit as exc:
        return ArmSeed(arm.name, seed, error=str(exc))
    return ArmSeed(arm.name, seed, points, {c.step: f"eval_{name}_step{c.step}" for c in checkpoints})


def recorded_or_run(args: argparse.Namespace, arm: Arm, seed: int, base: CurvePoint, meta: dict) -> ArmSeed | None:
    """The run of ``arm`` in ``seed`` from its record in ``args.records``, else run here and recorded (unless
    ``--no-write``); None with ``--recorded-only`` when there is no record."""
    recorded = load_run(args.records, arm.name, seed, args.out)
    if recorded is not None:
        print(f"{arm.name}, seed {seed}: from {shown_path(args.records)}", file=sys.stderr, flush=True)
        return ArmSeed(**recorded)
    if args.recorded_only:
        print(f"{arm.name}, seed {seed}: no record, left out (--recorded-only)", file=sys.stderr, flush=True)
        return None
    run = run_arm(args, arm, seed, base)
    if not args.no_write:
        save_run(run, args.out, args.records, meta)
        if not args.keep_weights and run.error is None:
            drop_weights(args.out / f"{arm.name}_seed{seed}", arm)
    return run


def drop_weights(run_dir: Path, arm: Arm) -> None:
    """Delete the checkpoints' weights of ``arm``'s recorded run in ``run_dir`` (its metrics and logs stay)."""
    import shutil

    paths = [run_dir / "checkpoints"] if arm.trainer == "relay" else [c.path for c in trl_checkpoints(run_dir)]
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


def base_point(args: argparse.Namespace, model_path: str, meta: dict) -> CurvePoint:
    """The base model's evaluation, from the race's record or evaluated here (and recorded unless ``--no-write``)."""
    recorded = load_base(args.records, args.out)
    if recorded is not None:
        return recorded
    base = CurvePoint.from_metrics(0, 0.0, evaluate("eval_base", model_path, args, dev_split(args)))
    if not args.no_write:
        save_base(base, args.out, args.records, meta)
    return base


def dev_split(args: argparse.Namespace) -> list[str]:
    return [f"data.generate.test_seed={DEV_TEST_SEED}"] if args.dev else []


def minute_grid(budget: float, every: float) -> list[float]:
    """The minutes the arms are read at: every ``every`` minutes up to the budget, the budget included.

    >>> minute_grid(10, 3)
    [3.0, 6.0, 9.0, 10.0]
    """
    grid = [every * i for i in range(1, int(budget / every) + 1)]
    return [float(m) for m in grid] + ([float(budget)] if not grid or grid[-1] < budget else [])


def seed_list(seeds: Sequence[ArmSeed]) -> str:
    return ",".join(str(r.seed) for r in seeds)


def spread_rows(runs: dict[str, list[ArmSeed]], grid: list[float], reading: str) -> list[str]:
    rows = [f"| arm | seeds | {' | '.join(f'{m:g} min' for m in grid)} |", "|---|---|" + "---|" * len(grid)]
    for arm, seeds in runs.items():
        ran = [r for r in seeds if r.error is None]
        if ran:
            cells = [spread_at([r.curve for r in ran], m, reading) for m in grid]
            shown = " | ".join(f"{s.mean:.3f} [{s.low:.3f}, {s.high:.3f}]" for s in cells)
            rows.append(f"| {arm} | {seed_list(ran)} | {shown} |")
    return rows


def target_rows(
    runs: dict[str, list[ArmSeed]], budget: float, reading: str, reference_arm: str = REFERENCE_ARM
) -> list[str]:
    """The reference's mean accuracy at ``budget`` over its seeds, then each arm's minutes to it and their ratio to
    the reference's, seed by seed in the seeds both ran."""
    reference = {r.seed: r.curve for r in runs.get(reference_arm, []) if r.error is None}
    if not reference:
        return [f"(no target: the reference arm {reference_arm} has no run)"]
    goal = target(list(reference.values()), budget, reading)
    rows = [
        f"Target: {reference_arm}'s mean {reading} accuracy at {budget:g} min over seeds "
        f"{','.join(map(str, reference))}, {goal:.3f}.",
        "",
        "| arm | seeds | minutes per seed | ratio to the reference per seed | worst ratio |",
        "|---|---|---|---|---|",
    ]
    for arm, seeds in runs.items():
        paired = [r for r in seeds if r.error is None and r.seed in reference]
        if not paired:
            continue
        t = time_to_target([r.curve for r in paired], [reference[r.seed] for r in paired], goal, reading)
        minutes = ", ".join("never" if m is None else f"{m:.1f}" for m in t.minutes)
        ratios = ", ".join("-" if r is None else f"{r:.2f}" for r in t.ratios)
        worst = t.worst_ratio()
        rows.append(
            f"| {arm} | {seed_list(paired)} | {minutes} | {ratios} | {'-' if worst is None else f'{worst:.2f}'} |"
        )
    return rows


def paired_rows(
    runs: dict[str, list[ArmSeed]], grid: list[float], out: Path, reading: str, reference_arm: str = REFERENCE_ARM
) -> list[str]:
    """Each arm against the reference at the grid's minutes, seed by seed, at their nearest checkpoints."""
    rows = [
        f"| arm - {reference_arm} | seed | minutes (arm / ref) | arm | ref | difference [95%] | only ref / only arm "
        "| McNemar p |",
        "|---|---|---|---|---|---|---|---|",
    ]
    reference = {r.seed: r for r in runs.get(reference_arm, []) if r.error is None}
    for arm, seeds in runs.items():
        for run in seeds:
            ref = reference.get(run.seed)
            if arm == reference_arm or run.error or ref is None:
                continue
            for minutes in grid:
                ours, theirs = nearest_checkpoint(run.curve, minutes), nearest_checkpoint(ref.curve, minutes)
                c = paired_at(
                    responses_file(out, ref.evaluations[theirs.step]),
                    responses_file(out, run.evaluations[ours.step]),
                    reading,
                )
                rows.append(
                    f"| {arm} | {run.seed} | {ours.minutes:.1f} / {theirs.minutes:.1f} | {c.accuracy_b:.3f} | "
                    f"{c.accuracy_a:.3f} | {c.difference:+.3f} [{c.low:+.3f}, {c.high:+.3f}] | {c.only_a} / "
                    f"{c.only_b} | {c.p_value:.3g} |"
                )
    return rows


def band_rows(
    runs: dict[str, list[ArmSeed]],
    out: Path,
    base_name: str,
    reading: str,
    classify: Callable[[str], str] = sum_band,
    order: Sequence[str] = BANDS,
) -> list[str]:
    """Each arm's final checkpoints' greedy accuracy by class of question (mean over seeds), the base model's first:
    by band of two-term sums, or with ``classify``/``order`` by any other grouping (:func:`digits_class`)."""
    from benchmarks.learning.paired import outcomes

    def by_class(names: list[str]) -> dict[str, tuple[float, int]]:
        hits: dict[str, list[bool]] = {}
        for name in names:
            for question, correct in outcomes(responses_file(out, name), 0, reading).values():
                hits.setdefault(classify(question), []).append(correct)
        return {key: (sum(v) / len(v), len(v) // len(names)) for key, v in hits.items()}

    tables = {"base": by_class([base_name])}
    for arm, seeds in runs.items():
        finals = [r.evaluations[max(r.evaluations)] for r in seeds if r.error is None and r.evaluations]
        if finals:
            tables[arm] = by_class(finals)
    keys = [k for k in order if k in tables["base"]]
    rows = ["| | " + " | ".join(f"{k} (n={tables['base'][k][1]})" for k in keys) + " |", "|---|" + "---|" * len(keys)]
    for name, table in tables.items():
        rows.append(f"| {name} | " + " | ".join(f"{table[k][0]:.3f}" if k in table else "-" for k in keys) + " |")
    return rows


# The classes of :func:`digits_class`: a two-term sum by its larger term's digits (the hard levels' breakdown).
DIGIT_CLASSES = ("larger term 1 digit", "larger term 2 digits", "larger term 3 digits", "larger term 4 digits", "other")


def digits_class(question: str) -> str:
    """``larger term N digits`` for a two-term sum, else ``other``.

    >>> digits_class("Calculate 104 + 7."), digits_class("Calculate 3 + 4."), digits_class("What is 2?")
    ('larger term 3 digits', 'larger term 1 digit', 'other')
    """
    digits = largest_term_digits(question)
    if digits is None:
        return "other"
    return f"larger term {digits} digit{'s' if digits > 1 else ''}"


def race_plot(path: Path, title: str, runs: dict[str, list[ArmSeed]], base: CurvePoint, reading: str) -> Path:
    """Each arm's mean ``reading`` accuracy against minutes with its seeds' range as a band; the base as a line."""
    from relay.run.summarize import _figure, _save

    fig, ax = _figure(title, "wall-clock minutes (training)", f"held-out {reading} accuracy (greedy)", width=8)
    ax.axhline(getattr(base, reading), color="grey", linestyle="--", label="base model")
    for i, (arm, seeds) in enumerate(runs.items()):
        curves = [r.curve for r in seeds if r.error is None]
        if not curves:
            continue
        minutes = sorted({p.minutes for c in curves for p in c})
        spreads = [spread_at(curves, m, reading) for m in minutes]
        ax.plot(minutes, [s.mean for s in spreads], color=f"C{i}", marker="o", label=f"{arm} ({len(curves)} seeds)")
        ax.fill_between(minutes, [s.low for s in spreads], [s.high for s in spreads], color=f"C{i}", alpha=0.2)
    ax.set_ylim(bottom=0.0)
    ax.legend()
    return _save(fig, path)


def report(args: argparse.Namespace, runs: dict[str, list[ArmSeed]], figure: str, machine: str) -> str:
    """The Markdown section: the arms' differences, then per reading the spread, target and paired tables, the
    bands, the failed arms and the figure."""
    grid = minute_grid(args.minutes, args.trl_save_minutes * 2)
    split = f"the dev split (test_seed {DEV_TEST_SEED})" if args.dev else "the preset's test split"
    seeds = ",".join(str(s) for s in args.seeds)
    chosen = f" --curriculum {shown_path(args.curriculum)}" if args.curriculum else ""
    chosen += f" --reference {args.reference}" if args.reference != REFERENCE_ARM else ""
    lines = [
        f"Reproduce: `python -m benchmarks.learning.race --config {shown_path(args.config)} --arms {','.join(runs)} "
        f"--seeds {seeds} --minutes {args.minutes:g}{chosen}` ({args.problems} problems of {split}, greedy; "
        f"{machine}; {time.strftime('%Y-%m-%d')}).",
        "",
        *difference_rows([ARMS[a] for a in runs]),
    ]
    for reading in READINGS:
        lines += ["", f"Held-out {reading} accuracy, mean over seeds [lowest, highest seed]:", ""]
        lines += spread_rows(runs, grid, reading) + [""] + target_rows(runs, args.minutes, reading, args.reference)
        lines += ["", f"Paired against the reference at matched minutes ({reading}, greedy):", ""]
        lines += paired_rows(runs, grid, args.out, reading, args.reference)
        lines += ["", f"Final checkpoints by band ({reading}, greedy; mean over seeds):", ""]
        lines += band_rows(runs, args.out, "eval_base", reading)
        lines += ["", f"Final checkpoints by the larger term's digits ({reading}, greedy; mean over seeds):", ""]
        lines += band_rows(runs, args.out, "eval_base", reading, digits_class, DIGIT_CLASSES)
    failed = [r for seeds in runs.values() for r in seeds if r.error]
    for r in failed:
        lines += ["", f"{r.arm}, seed {r.seed}: did not run here: {r.error.splitlines()[0]}"]
    lines += ["", f"![held-out accuracy against minutes, mean and range over seeds]({figure})"]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from benchmarks.harness.cli import add_held_out_options

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=PRESET, help="the preset every arm gets")
    parser.add_argument("--arms", default=",".join(DEFAULT_ARMS), help=f"comma-separated, of {', '.join(ARMS)}")
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated training seeds")
    parser.add_argument("--minutes", type=float, default=None, help="budget per run (default: the preset's)")
    parser.add_argument("--save-every", type=int, default=8, help="Relay's checkpoint interval in steps")
    parser.add_argument("--trl-save-minutes", type=float, default=3.0, help="TRL's checkpoint interval in minutes")
    parser.add_argument("--dev", action="store_true", help=f"the dev split (test_seed {DEV_TEST_SEED})")
    parser.add_argument("--curriculum", type=Path, default=None, help="relay_curriculum's preset (a data.curriculum)")
    parser.add_argument("--reference", default=REFERENCE_ARM, help="the arm whose final accuracy is the target")
    parser.add_argument("--keep-weights", action="store_true", help="keep a recorded run's checkpoint weights")
    parser.add_argument(
        "--records", type=Path, default=None, help="the runs' records (default: benchmarks/results/race/<race>)"
    )
    parser.add_argument(
        "--recorded-only", action="store_true", help="report the recorded runs; run none (a seed not run is left out)"
    )
    add_held_out_options(parser, "race")
    args = parser.parse_args(argv)
    args.config = args.config.resolve()
    args.curriculum = args.curriculum.resolve() if args.curriculum else None
    args.seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    return args


def main(argv: list[str] | None = None) -> int:
    from benchmarks.harness.cli import cpu_label, phases_dir, run_meta

    args = parse_args(argv)
    arms = arms_named(args.arms, args.curriculum, args.reference)
    if args.curriculum is not None:
        check_curriculum(args.curriculum, args.config)
    cfg = preset_with_budget(args, dev_split(args))
    if cfg is None:
        return 2
    phases_dir(args)
    args.records = args.records or RECORDS / race_key(preset_name(args.config), args.dev, args.minutes, args.problems)
    args.records.mkdir(parents=True, exist_ok=True)
    meta = run_meta("benchmarks.learning.race", argv)
    base = base_point(args, cfg.model.path, meta)
    found = {arm.name: [recorded_or_run(args, arm, seed, base, meta) for seed in args.seeds] for arm in arms}
    runs = {arm: [r for r in seeds if r is not None] for arm, seeds in found.items()}
    name = f"race_{preset_name(args.config)}" + ("_dev" if args.dev else "")
    figure_dir = args.out if args.no_write else REPO_ROOT / "docs"
    figure = race_plot(figure_dir / f"{name}.png", f"{name}: {len(args.seeds)} seeds per arm", runs, base, "strict")
    section = report(args, runs, f"docs/{figure.name}", cpu_label())
    results = {"runs": {arm: [asdict(r) for r in seeds] for arm, seeds in runs.items()}, "base": asdict(base)}
    marks = (f"<!-- {name}:begin -->", f"<!-- {name}:end -->")
    title = f"The learning race on {preset_name(args.config)}: arms and seeds"
    publish(name, json.loads(json.dumps(results, default=str)), section, marks, title, not args.no_write, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
