"""Does training make the model better on held-out problems, and how fast? Relay and TRL at equal wall-clock.

    python -m benchmarks.learning.relay_vs_trl [--config configs/arithmetic_smollm2.yaml] [--minutes M] [--problems 200]
        [--save-every 8] [--curriculum CONFIG] [--out outputs/learning]
        [--skip-trl] [--fresh] [--no-write]

1. ``eval_base``: ``python -m driver.evaluate`` of the preset's model, greedy (``--k 0``), on the first
   ``--problems`` held-out problems of the preset's task (the same ones every time): strict and lenient accuracy
   with their 95% Wilson intervals, and the format rate.
2. ``relay``: ``python trainer.py --config PRESET`` for ``M`` minutes (``trainer.time_budget_minutes``, default
   the preset's) with a checkpoint every ``--save-every`` steps and none pruned, no validation inside the run (its
   minutes are training only), into ``OUT/relay``; each checkpoint evaluated as in 1.
3. ``relay_curriculum`` (with ``--curriculum CONFIG``): the same with ``CONFIG`` (a ``data.curriculum`` that ends
   at the preset's task), evaluated on the preset's held-out problems.
4. ``trl``: ``python -m benchmarks.learning.trl_baseline`` (TRL's GRPOTrainer with the preset's model, problems and
   their order, prompt, reward, lengths, group size, learning rate, KL and clip) for the same budget, saving its policy
   after each minute Relay saved at, into ``OUT/trl``; each saved policy evaluated as in 1.
5. ``report``: the curves' table, Relay minus TRL at each of TRL's checkpoints (Relay's curve read between its
   points), the minutes Relay takes to reach TRL's final accuracy, and one figure of held-out accuracy against
   minutes (``docs/learning_<preset>.png``), written between the preset's ``learning`` markers of BENCHMARKS.md
   (``--no-write``: only into ``OUT``) and ``benchmarks/results/learning_<preset>.json``.

A phase whose output already exists in ``OUT`` is reused (so an interrupted benchmark continues, and
``--problems``/preset changes need ``--fresh``, which clears ``OUT``). Each phase's output goes to
``OUT/logs/<phase>.log``. Run it alone on the machine: the trainers are timed, and the budget is theirs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness.cli import add_held_out_options, cpu_label, phases_dir
from benchmarks.harness.publish import publish, shown_path
from benchmarks.learning.curve import Checkpoint, CurvePoint
from relay.metrics import outcomes as om
from relay.metrics import validation as vm
from relay.repo import REPO_ROOT

PRESET = REPO_ROOT / "configs" / "arithmetic_smollm2.yaml"


def run_phase(name: str, cmd: list[str], out: Path) -> None:
    """Run ``cmd`` in the repository with its output in ``out/logs/<name>.log``; exit with its tail on failure."""
    log = out / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    print(f"[{time.strftime('%H:%M:%S')}] {name}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    with log.open("w") as f:
        code = subprocess.call(cmd, cwd=REPO_ROOT, stdout=f, stderr=subprocess.STDOUT)
    minutes = (time.perf_counter() - start) / 60
    if code != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-30:])
        raise SystemExit(f"{name} failed (exit {code}) after {minutes:.1f} min; last lines of {log}:\n{tail}")
    print(f"[{time.strftime('%H:%M:%S')}] {name}: done in {minutes:.1f} min", file=sys.stderr, flush=True)


def evaluate(
    name: str, checkpoint: Path | str, args: argparse.Namespace, extra: Sequence[str] = ()
) -> dict[str, float]:
    """Greedy held-out evaluation (``driver.evaluate``) with the preset's settings and ``extra`` overrides; cached
    in ``OUT/<name>.json``, each problem's response and grade in ``OUT/<name>.responses.jsonl``."""
    result = args.out / f"{name}.json"
    if not result.is_file():
        cmd = [sys.executable, "-m", "driver.evaluate", "--checkpoint", str(checkpoint), "--config", str(args.config)]
        cmd += ["--samples", str(args.problems), "--k", "0", "--out", str(result)]
        cmd += ["--responses", str(responses_file(args.out, name))]
        for setting in extra:
            cmd += ["--set", setting]
        run_phase(name, cmd, args.out)
    return json.loads(result.read_text())


def responses_file(out: Path, name: str) -> Path:
    """Where :func:`evaluate` writes the evaluation ``name``'s responses."""
    return out / f"{name}.responses.jsonl"


def train_relay(args: argparse.Namespace, name: str, config: Path, extra: Sequence[str] = ()) -> Path:
    """Phase 2/3: ``config`` (with ``extra`` overrides) for the budget, a checkpoint every ``--save-every`` steps,
    into ``OUT/<name>``."""
    from relay.checkpoint.store import latest_checkpoint

    run_dir = args.out / name
    if not run_dir.is_dir() or latest_checkpoint(run_dir) is None:
        shutil.rmtree(run_dir, ignore_errors=True)
        settings = [f"trainer.output_dir={args.out}", f"trainer.run_name={name}", "trainer.test_freq=-1"]
        settings += [f"trainer.save_freq={args.save_every}", "trainer.keep_checkpoints=0"]
        settings += [f"trainer.time_budget_minutes={args.minutes}", *extra]
        cmd = [sys.executable, "trainer.py", "--config", str(config)]
        for setting in settings:
            cmd += ["--set", setting]
        run_phase(name, cmd, args.out)
    return run_dir


def train_trl(
    args: argparse.Namespace,
    save_minutes: list[float],
    name: str = "trl",
    extra: Sequence[str] = (),
    vllm: bool = False,
) -> Path:
    """Phase 4: TRL (with ``extra`` overrides of the preset; sampling with vLLM with ``vllm``) for the budget,
    saving after each of ``save_minutes``, into ``OUT/<name>``."""
    out = args.out / name
    if not (out / "final" / "config.json").is_file():
        cmd = [sys.executable, "-m", "benchmarks.learning.trl_baseline", "--config", str(args.config)]
        cmd += ["--minutes", str(args.minutes), "--out", str(out)]
        cmd += ["--save-minutes", ",".join(f"{m:.2f}" for m in save_minutes)]
        cmd += ["--vllm"] if vllm else []
        for setting in extra:
            cmd += ["--set", setting]
        run_phase(name, cmd, args.out)
    return out


def curve(
    name: str, checkpoints: list[Checkpoint], base: CurvePoint, args: argparse.Namespace, extra: Sequence[str] = ()
) -> list[CurvePoint]:
    """The base point, then each checkpoint's held-out evaluation (``OUT/eval_<name>_step<N>.json``)."""
    points = [base]
    for c in checkpoints:
        metrics = evaluate(f"eval_{name}_step{c.step}", c.path, args, extra)
        points.append(CurvePoint.from_metrics(c.step, c.minutes, metrics))
    return points


def held_out(name: str, metrics: dict[str, float], minutes: float) -> dict[str, Any]:
    return {
        "name": name,
        "minutes": minutes,
        "accuracy": metrics[vm.VAL_ACCURACY],
        "accuracy_ci": [metrics[vm.VAL_ACCURACY_CI_LOW], metrics[vm.VAL_ACCURACY_CI_HIGH]],
        "format_rate": metrics[vm.VAL_FORMAT_RATE],
        "truncated": metrics.get(vm.VAL_TRUNCATED_GREEDY),
        "length_mean": metrics.get(vm.VAL_GREEDY_LENGTH),
        "problems": int(metrics[vm.VAL_PROBLEMS]),
    }


def trainer_summary(rows: list[dict[str, Any]], final: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """Training-reward trend and held-out gains of one trainer's run."""
    from benchmarks.learning.wall_clock import first_last_means
    from relay.evaluation import wilson_interval

    rewards = [float(r[om.REWARD_MEAN]) for r in rows if r.get(om.REWARD_MEAN) is not None]
    first, last = first_last_means(rewards, 10) if rewards else (float("nan"), float("nan"))
    n = final["problems"]
    fmt_low, fmt_high = wilson_interval(round(final["format_rate"] * n), n)
    return {
        "steps": len(rows),
        "train_minutes": final["minutes"],
        "reward_first10": first,
        "reward_last10": last,
        "format_rate_ci": [fmt_low, fmt_high],
        "format_ratio_vs_base": final["format_rate"] / base["format_rate"] if base["format_rate"] else None,
        "accuracy_minus_base": final["accuracy"] - base["accuracy"],
    }


def compare(relay: dict[str, Any], trl: dict[str, Any], key: str) -> dict[str, float | bool]:
    """Relay minus TRL in a held-out rate, with its 95% interval (independent-samples Newcombe)."""
    from relay.evaluation import difference_interval

    n1, n2 = relay["problems"], trl["problems"]
    d, low, high = difference_interval(round(relay[key] * n1), n1, round(trl[key] * n2), n2)
    return {"difference": d, "low": low, "high": high, "within_noise": low <= 0.0 <= high}


def difference_lines(label: str, differences: dict[str, dict[str, float | bool]]) -> list[str]:
    """A paragraph per held-out rate of :func:`compare`'s ``differences``: ``label`` (which minus which), the
    difference, its 95% interval and whether that interval holds 0."""
    lines = []
    for key, diff in differences.items():
        verdict = "within noise" if diff["within_noise"] else "outside noise"
        lines.append("")
        lines.append(
            f"{label}, held-out {key.replace('_', ' ')}: {diff['difference']:+.3f} "
            f"(95% CI [{diff['low']:+.3f}, {diff['high']:+.3f}], {verdict})."
        )
    return lines


def preset_name(config: Path) -> str:
    """The name a preset's results go by: its file's stem (``arithmetic_smollm2``)."""
    return Path(config).stem


def arm_summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Steps and the training reward's first and last 10-step means of one run's metric rows."""
    from benchmarks.learning.wall_clock import first_last_means

    rewards = [float(r[om.REWARD_MEAN]) for r in rows if r.get(om.REWARD_MEAN) is not None]
    first, last = first_last_means(rewards, 10) if rewards else (float("nan"), float("nan"))
    return {"steps": len(rows), "reward_first10": first, "reward_last10": last}


def verdict_lines(label: str, verdict: dict[str, Any]) -> list[str]:
    """A sentence of :func:`benchmarks.learning.curve.race_verdict`'s result."""
    diffs = ", ".join(
        f"{d['minutes']:.1f} min {d['difference']:+.3f} (checkpoints {d['nearest']['minutes']:.1f} min: "
        f"{d['nearest']['difference']:+.3f} [{d['nearest']['low']:+.3f}, {d['nearest']['high']:+.3f}])"
        for d in verdict["differences"]
    )
    reach = verdict["minutes_to_their_final"]
    reached = (
        f"reaches the other's final {verdict['reading']} accuracy at {reach:.1f} min "
        f"({verdict['share_of_their_minutes']:.2f} of its minutes)"
        if reach is not None
        else "never reaches the other's final accuracy"
        if verdict.get("their_final_above_start", True)
        else "the other's final accuracy is no higher than its start (nothing to reach)"
    )
    ahead = "ahead at every checkpoint" if verdict["ahead_everywhere"] else "not ahead at every checkpoint"
    return ["", f"{label}, {verdict['reading']}: {diffs}; {ahead}; {reached}."]


def report(args: argparse.Namespace, results: dict[str, Any], figure: str) -> str:
    """The Markdown section of BENCHMARKS.md for ``results``: every arm's curve, the verdicts and the figure."""
    from benchmarks.learning.curve import CurvePoint, curve_table

    curves = {name: [CurvePoint(**p) for p in points] for name, points in results["curves"].items()}
    lines = [
        f"Reproduce: `python -m benchmarks.learning.relay_vs_trl --config {shown_path(args.config)} "
        f"--minutes {results['budget_minutes']:g}` "
        f"({results['problems']} held-out problems, greedy, {results['max_new_tokens']} new tokens; "
        f"{results['machine']}; {results['date']}).",
        "",
        *curve_table(curves),
        "",
        "| arm | steps | training reward, first 10 → last 10 |",
        "|---|---:|---|",
    ]
    for name, s in results["arms"].items():
        lines.append(f"| {name} | {s['steps']} | {s['reward_first10']:.3f} → {s['reward_last10']:.3f} |")
    for label, verdict in results["verdicts"]:
        lines += verdict_lines(label, verdict)
    lines += ["", f"![held-out strict and lenient accuracy with 95% intervals against minutes]({figure})"]
    return "\n".join(lines)


def run_arms(args: argparse.Namespace, base: CurvePoint) -> tuple[dict[str, list[CurvePoint]], dict[str, list]]:
    """Train and evaluate every arm; their curves and metric rows."""
    from benchmarks.learning.curve import relay_checkpoints, trl_checkpoints
    from relay.run.summarize import load_metrics

    arms = {"relay": args.config} | ({"relay_curriculum": args.curriculum} if args.curriculum else {})
    curves, rows = {}, {}
    for name, config in arms.items():
        run_dir = train_relay(args, name, config)
        rows[name] = load_metrics(run_dir / "metrics.jsonl")
        curves[name] = curve(name, relay_checkpoints(run_dir), base, args)
    if not args.skip_trl:
        trl_dir = train_trl(args, [p.minutes for p in curves["relay"][1:-1]])
        rows["trl"] = load_metrics(trl_dir / "metrics.jsonl")
        curves["trl"] = curve("trl", trl_checkpoints(trl_dir), base, args)
    return curves, rows


def verdicts(curves: dict[str, list[CurvePoint]]) -> list[tuple[str, dict[str, Any]]]:
    """Relay against TRL and the curriculum against fixed difficulty, strict and lenient."""
    from benchmarks.learning.curve import READINGS, race_verdict

    pairs = [("relay", "trl", "Relay − TRL"), ("relay_curriculum", "relay", "Curriculum − fixed difficulty")]
    return [
        (label, race_verdict(curves[ours], curves[theirs], reading))
        for ours, theirs, label in pairs
        if ours in curves and theirs in curves
        for reading in READINGS
    ]


def preset_with_budget(args: argparse.Namespace, overrides: Sequence[str] = ()) -> Any | None:
    """``args.config`` with ``overrides``, and ``args.minutes`` set to its ``trainer.time_budget_minutes`` when not
    given; None, the reason on stderr, when the preset does not load or has no budget."""
    from relay.config import ConfigError, load_config

    try:
        cfg = load_config(args.config, list(overrides)).cfg
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    args.minutes = args.minutes if args.minutes is not None else cfg.trainer.time_budget_minutes
    if args.minutes is None:
        print(f"error: {args.config} has no trainer.time_budget_minutes; pass --minutes", file=sys.stderr)
        return None
    return cfg


def main(argv: list[str] | None = None) -> int:

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=PRESET, help="the preset both trainers get")
    parser.add_argument("--minutes", type=float, default=None, help="budget per trainer (default: the preset's)")
    parser.add_argument("--save-every", type=int, default=8, help="Relay's checkpoint interval in steps")
    parser.add_argument("--curriculum", type=Path, default=None, help="a curriculum preset: one more Relay arm")
    parser.add_argument("--skip-trl", action="store_true", help="only the base model and Relay")
    add_held_out_options(parser, "learning")
    args = parser.parse_args(argv)
    args.config = args.config.resolve()
    from benchmarks.learning.curve import as_json, curve_plot

    cfg = preset_with_budget(args)
    if cfg is None:
        return 2
    phases_dir(args)
    base = CurvePoint.from_metrics(0, 0.0, evaluate("eval_base", cfg.model.path, args))
    curves, rows = run_arms(args, base)
    name = preset_name(args.config)
    results: dict[str, Any] = {
        "preset": shown_path(args.config),
        "budget_minutes": args.minutes,
        "problems": args.problems,
        "max_new_tokens": cfg.data.max_response_length,
        "machine": cpu_label(),
        "date": time.strftime("%Y-%m-%d"),
        "curves": as_json(curves),
        "arms": {arm: arm_summary(arm_rows) for arm, arm_rows in rows.items()},
        "verdicts": verdicts(curves),
    }
    figure_dir = args.out if args.no_write else REPO_ROOT / "docs"
    figure = curve_plot(figure_dir / f"learning_{name}.png", f"Held-out {name}, {args.problems} problems", curves)
    section = report(args, results, f"docs/{figure.name}")
    marks = (f"<!-- learning:{name}:begin -->", f"<!-- learning:{name}:end -->")
    title = f"Learning race on {name}: Relay vs TRL at equal wall-clock"
    publish(f"learning_{name}", results, section, marks, title, write=not args.no_write, out=args.out)
    print(f"plot: {figure}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
