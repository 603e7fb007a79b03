"""Does training make SmolLM2 better on GSM8K? Relay and TRL at equal wall-clock, held-out before and after.

    python -m benchmarks.learning [--config configs/gsm8k_smollm2_learn.yaml] [--minutes M] [--problems 200]
                                  [--out outputs/learning] [--skip-trl] [--fresh] [--no-write]

1. ``base``: ``python -m driver.evaluate`` of the preset's model, greedy (``--k 0``), on the first ``--problems``
   GSM8K **test** problems (the same ones every time) with the preset's prompt and response length:
   accuracy with its 95% Wilson interval, and the format rate (a final answer the grader can find).
2. ``relay``: ``python trainer.py --config PRESET`` with ``trainer.time_budget_minutes=M`` (default: the
   preset's), into ``OUT/relay``.
3. ``relay_eval``: the same evaluation of the run's final checkpoint.
4. ``trl``: ``python -m benchmarks.trl_learning`` (TRL 1.16 GRPOTrainer with the preset's model, data order,
   prompt, reward, lengths, batch, learning rate, KL and clip) for the same budget and stop rule, into
   ``OUT/trl``; ``trl_eval`` evaluates its final model the same way.
5. ``report``: a Markdown table and two plots (``docs/learning_reward.png``: training reward vs wall-clock
   minutes; ``docs/learning_heldout.png``: held-out accuracy and format rate, base at minute 0, each final
   model at its training minutes), written between the ``learning`` markers of BENCHMARKS.md
   (``--no-write``: only into ``OUT``), and ``benchmarks/results/learning.json``.

A phase whose output already exists in ``OUT`` is reused (so an interrupted benchmark continues, and
``--problems``/preset changes need ``--fresh``, which clears ``OUT``). Each phase's output goes to
``OUT/logs/<phase>.log``. Run it alone on the machine: the two trainers are timed, and the budget is theirs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.cli import add_held_out_options, phases_dir
from relay.repo import REPO_ROOT

PRESET = REPO_ROOT / "configs" / "gsm8k_smollm2_learn.yaml"
MARK_BEGIN, MARK_END = "<!-- learning:begin -->", "<!-- learning:end -->"
TITLE = "Learning: Relay vs TRL at equal wall-clock"


def _shown(path: Path | str) -> str:
    """``path`` relative to the repository when it is inside it (a preset), else as given (a file elsewhere)."""
    resolved = Path(path).resolve()
    return str(resolved.relative_to(REPO_ROOT)) if resolved.is_relative_to(REPO_ROOT) else str(path)


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


def evaluate(name: str, checkpoint: Path | str, args: argparse.Namespace) -> dict[str, float]:
    """Greedy held-out evaluation (``driver.evaluate``) with the preset's settings; cached in ``OUT/<name>.json``."""
    result = args.out / f"{name}.json"
    if not result.is_file():
        cmd = [sys.executable, "-m", "driver.evaluate", "--checkpoint", str(checkpoint), "--config", str(args.config)]
        cmd += ["--samples", str(args.problems), "--k", "0", "--out", str(result)]
        run_phase(name, cmd, args.out)
    return json.loads(result.read_text())


def train_relay(args: argparse.Namespace) -> Path:
    from relay.checkpoint.store import latest_checkpoint

    run_dir = args.out / "relay"
    if not run_dir.is_dir() or latest_checkpoint(run_dir) is None:
        shutil.rmtree(run_dir, ignore_errors=True)
        cmd = [sys.executable, "trainer.py", "--config", str(args.config)]
        cmd += ["--set", f"trainer.output_dir={args.out}", "--set", "trainer.run_name=relay"]
        if args.minutes is not None:
            cmd += ["--set", f"trainer.time_budget_minutes={args.minutes}"]
        run_phase("relay", cmd, args.out)
    return run_dir


def train_trl(args: argparse.Namespace, minutes: float) -> Path:
    out = args.out / "trl"
    if not (out / "final" / "config.json").is_file():
        cmd = [sys.executable, "-m", "benchmarks.trl_learning", "--config", str(args.config)]
        cmd += ["--minutes", str(minutes), "--out", str(out)]
        run_phase("trl", cmd, args.out)
    return out


def held_out(name: str, metrics: dict[str, float], minutes: float) -> dict[str, Any]:
    return {
        "name": name,
        "minutes": minutes,
        "accuracy": metrics["val/accuracy_greedy"],
        "accuracy_ci": [metrics["val/accuracy_greedy_ci_low"], metrics["val/accuracy_greedy_ci_high"]],
        "format_rate": metrics["val/format_rate_greedy"],
        "truncated": metrics.get("val/truncated_frac_greedy"),
        "length_mean": metrics.get("val/greedy_length_mean"),
        "problems": int(metrics["val/problems"]),
    }


def trainer_summary(rows: list[dict[str, Any]], final: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """Training-reward trend and held-out gains of one trainer's run."""
    from benchmarks.wall_clock import first_last_means
    from relay.evaluation import wilson_interval

    rewards = [float(r["reward/mean"]) for r in rows if r.get("reward/mean") is not None]
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


def report(args: argparse.Namespace, results: dict[str, Any]) -> str:
    """The Markdown section of BENCHMARKS.md for ``results``: the base model, Relay and TRL held out, their training
    figures, and Relay − TRL with its interval."""
    lines = [
        f"Reproduce: `python -m benchmarks.learning --config {_shown(args.config)}` "
        f"(budget {results['budget_minutes']} min per trainer; {results['problems']} GSM8K test problems, greedy, "
        f"{results['max_new_tokens']} new tokens; {results['machine']}; {results['date']}).",
        "",
        "| model | training min | steps | reward first 10 → last 10 | held-out accuracy [95% CI] | format rate "
        "[95% CI] | truncated | mean length |",
        "|---|---:|---:|---|---|---|---:|---:|",
    ]
    for name in ("base", "relay", "trl"):
        e = results["held_out"].get(name)
        if e is None:
            continue
        s = results["trainers"].get(name, {})
        reward = f"{s['reward_first10']:.3f} → {s['reward_last10']:.3f}" if s else "-"
        fmt_ci = s.get("format_rate_ci")
        fmt = f"{e['format_rate']:.3f}" + (f" [{fmt_ci[0]:.3f}, {fmt_ci[1]:.3f}]" if fmt_ci else "")
        lines.append(
            f"| {name} | {e['minutes']:.1f} | {s.get('steps', 0)} | {reward} | {e['accuracy']:.3f} "
            f"[{e['accuracy_ci'][0]:.3f}, {e['accuracy_ci'][1]:.3f}] | {fmt} | {e['truncated']:.2f} | "
            f"{e['length_mean']:.0f} |"
        )
    lines += difference_lines("Relay − TRL", results.get("relay_minus_trl", {}))
    lines += ["", "![training reward](docs/learning_reward.png)", "", "![held-out](docs/learning_heldout.png)"]
    return "\n".join(lines)


def write_section(
    path: Path,
    section: str,
    marks: tuple[str, str] = (MARK_BEGIN, MARK_END),
    title: str = TITLE,
) -> None:
    """Replace the text between the ``marks`` of ``path`` (appended under ``title`` with the marks if absent)."""
    begin, end = marks
    text = path.read_text()
    block = f"{begin}\n{section}\n{end}"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + f"\n\n## {title}\n\n" + block + "\n"
    path.write_text(text)


def publish(name: str, result: dict[str, Any], section: str, marks: tuple[str, str], title: str, write: bool) -> None:
    """Print ``section``; with ``write``, first save ``result`` as ``benchmarks/results/<name>.json`` and ``section``
    between the ``marks`` of BENCHMARKS.md (:func:`write_section`)."""
    if write:
        (REPO_ROOT / "benchmarks" / "results" / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        write_section(REPO_ROOT / "BENCHMARKS.md", section, marks, title)
    print(section)


def plots(results: dict[str, Any], runs: dict[str, list[dict[str, Any]]], out_dir: Path) -> list[Path]:
    from benchmarks.wall_clock import HeldOut, held_out_plot, training_curve_plot, wall_clock_series

    out_dir.mkdir(parents=True, exist_ok=True)
    curves = {name: wall_clock_series(rows, "reward/mean") for name, rows in runs.items()}
    reward = training_curve_plot(
        out_dir / "learning_reward.png", "Training reward (sampled responses)", "reward/mean", curves
    )
    base = results["held_out"]["base"]
    points: dict[str, list[HeldOut]] = {}
    for name in runs:
        final = results["held_out"][name]
        points[f"{name}: accuracy"] = [
            HeldOut(0.0, base["accuracy"], *base["accuracy_ci"]),
            HeldOut(final["minutes"], final["accuracy"], *final["accuracy_ci"]),
        ]
        fmt_ci = results["trainers"][name]["format_rate_ci"]
        base_fmt = results["base_format_rate_ci"]
        points[f"{name}: format rate"] = [
            HeldOut(0.0, base["format_rate"], *base_fmt),
            HeldOut(final["minutes"], final["format_rate"], *fmt_ci),
        ]
    heldout = held_out_plot(
        out_dir / "learning_heldout.png",
        f"Held-out GSM8K test ({base['problems']} problems, greedy)",
        "rate",
        points,
    )
    return [reward, heldout]


def main(argv: list[str] | None = None) -> int:
    import platform

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=PRESET, help="the preset both trainers get")
    parser.add_argument("--minutes", type=float, default=None, help="budget per trainer (default: the preset's)")
    parser.add_argument("--skip-trl", action="store_true", help="only the base model and Relay")
    add_held_out_options(parser, "learning")
    args = parser.parse_args(argv)
    args.config = args.config.resolve()
    from relay.config import ConfigError, load_config
    from relay.run.summarize import load_metrics

    try:
        cfg = load_config(args.config, []).cfg
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    budget = args.minutes if args.minutes is not None else cfg.trainer.time_budget_minutes
    if budget is None:
        print(f"error: {args.config} has no trainer.time_budget_minutes; pass --minutes", file=sys.stderr)
        return 2
    args.minutes = budget
    phases_dir(args)

    from relay.evaluation import wilson_interval

    base_metrics = evaluate("eval_base", cfg.model.path, args)
    results: dict[str, Any] = {
        "budget_minutes": budget,
        "problems": args.problems,
        "max_new_tokens": cfg.data.max_response_length,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, no GPU",
        "date": time.strftime("%Y-%m-%d"),
        "held_out": {"base": held_out("base", base_metrics, 0.0)},
        "trainers": {},
    }
    base = results["held_out"]["base"]
    results["base_format_rate_ci"] = list(wilson_interval(round(base["format_rate"] * args.problems), args.problems))
    runs: dict[str, list[dict[str, Any]]] = {}
    relay_dir = train_relay(args)
    runs["relay"] = load_metrics(relay_dir / "metrics.jsonl")
    relay_minutes = runs["relay"][-1]["time/elapsed_s"] / 60
    results["held_out"]["relay"] = held_out("relay", evaluate("eval_relay", relay_dir, args), relay_minutes)
    if not args.skip_trl:
        trl_dir = train_trl(args, budget)
        runs["trl"] = load_metrics(trl_dir / "metrics.jsonl")
        trl_minutes = runs["trl"][-1]["time/elapsed_s"] / 60
        results["held_out"]["trl"] = held_out("trl", evaluate("eval_trl", trl_dir / "final", args), trl_minutes)
    for name, rows in runs.items():
        results["trainers"][name] = trainer_summary(rows, results["held_out"][name], base)
    if "trl" in runs:
        relay, trl = results["held_out"]["relay"], results["held_out"]["trl"]
        results["relay_minus_trl"] = {key: compare(relay, trl, key) for key in ("accuracy", "format_rate")}
    section = report(args, results)
    (args.out / "report.md").write_text(section + "\n")
    (args.out / "results.json").write_text(json.dumps(results, indent=2))
    written = plots(results, runs, args.out if args.no_write else REPO_ROOT / "docs")
    publish("learning", results, section, (MARK_BEGIN, MARK_END), TITLE, write=not args.no_write)
    print("plots: " + ", ".join(str(p) for p in written), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
