"""Where a judge's score and true accuracy part: a run rewarded by an LLM judge alone, its held-out accuracy (the
exact grader's) beside the judge's score of the policy's samples, at every validation.

    python trainer.py --config configs/arithmetic_smollm2_judge.yaml --set trainer.run_name=judge-only
    python -m driver.evaluate --checkpoint smollm2-135m --config configs/arithmetic_smollm2_judge.yaml \\
        --samples 200 --k 0 --out outputs/judge-only-base.json
    python -m benchmarks.learning.judge_curve --run outputs/judge-only --base outputs/judge-only-base.json [--no-write]

The run's training reward is the judge's P(yes) only (``reward.sources``), while its validation grades the preset's
held-out split with the exact grader, strictly and leniently. Each table row is one step: its minute, the judge's mean
score of the step's samples (what the policy is pushed towards), the exact grader's accuracy of those same samples
(``reward/accuracy``, logged but not rewarded) and their mean length, and, where the step validated, the greedy
held-out accuracy with its 95% Wilson interval. The base row is the untrained model's evaluation with the
same config. Writes BENCHMARKS.md's "An LLM judge as the only reward".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from relay.metrics import outcomes as om
from relay.metrics import system as sm
from relay.metrics import validation as vm

MARKS = ("<!-- judge-curve:begin -->", "<!-- judge-curve:end -->")
TITLE = "An LLM judge as the only reward"
JUDGE_SCORE, SAMPLE_ACCURACY, LENGTH = om.REWARD_MODEL_SCORE_MEAN, om.REWARD_ACCURACY, om.RESPONSE_LENGTH_MEAN
STRICT, LENIENT = vm.VAL_ACCURACY, vm.VAL_LENIENT_ACCURACY


def _interval(row: dict[str, Any], key: str) -> str:
    low, high = row.get(f"{key}_ci_low"), row.get(f"{key}_ci_high")
    bounds = f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
    return f"{row[key]:.3f}{bounds}"


def curve(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per step of ``rows`` (a run's metrics, in step order): its minute, the judge's mean score of its
    samples, their exact accuracy and mean length, and the held-out readings where the step validated.

    >>> rows = [{"step": 0, sm.TIME_ELAPSED: 60, JUDGE_SCORE: 0.4, SAMPLE_ACCURACY: 0.1, LENGTH: 30.0},
    ...         {"step": 1, sm.TIME_ELAPSED: 120, JUDGE_SCORE: 0.6, SAMPLE_ACCURACY: 0.0, STRICT: 0.2, LENIENT: 0.5}]
    >>> [(c["step"], c["minute"], c["judge"], c["strict"]) for c in curve(rows)]
    [(0, 1.0, 0.4, None), (1, 2.0, 0.6, '0.200')]
    """
    return [
        {
            "step": int(row["step"]),
            "minute": round(float(row.get(sm.TIME_ELAPSED, 0.0)) / 60, 1),
            "judge": row.get(JUDGE_SCORE),
            "samples_right": row.get(SAMPLE_ACCURACY),
            "length": row.get(LENGTH),
            "strict": _interval(row, STRICT) if STRICT in row else None,
            "lenient": _interval(row, LENIENT) if LENIENT in row else None,
        }
        for row in rows
    ]


def _cell(value: float | str | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    return value if isinstance(value, str) else f"{value:.{digits}f}"


def report(points: list[dict[str, Any]], base: dict[str, Any], meta: dict[str, Any]) -> str:
    """The BENCHMARKS.md section: where and how it ran, then the base row and one row per step."""
    head = (
        f"`{meta['command']}` at `{meta['commit']}`, {meta['machine']}, {meta['date']}: run `{meta['run']}`, "
        f"{meta['steps']} steps in {meta['minutes']:.1f} min; base: `{meta['base']}`."
    )
    lines = [
        head,
        "",
        "| after | minute | judge's score of the samples | samples right (exact, not rewarded) | response tokens "
        "| held-out strict [95% CI] | held-out lenient [95% CI] |",
        "|---|---|---|---|---|---|---|",
        f"| base | - | - | - | - | {_interval(base, STRICT)} | {_interval(base, LENIENT)} |",
    ]
    for p in points:
        cells = [_cell(p["judge"]), _cell(p["samples_right"]), _cell(p["length"], 1), _cell(p["strict"])]
        lines.append(f"| step {p['step']} | {p['minute']} | " + " | ".join([*cells, _cell(p["lenient"])]) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from benchmarks.harness.cli import run_meta
    from benchmarks.harness.publish import publish, shown_path
    from relay.run.summarize import load_metrics

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="the judge-only run's directory")
    parser.add_argument("--base", type=Path, required=True, help="driver.evaluate --out of the untrained model")
    parser.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md and results/ alone")
    args = parser.parse_args(argv)
    for path in (args.run / "metrics.jsonl", args.base):
        if not path.is_file():
            parser.error(f"no {path}: train the run and evaluate the base first (the commands above, in --help)")
    rows = load_metrics(args.run / "metrics.jsonl")
    base = json.loads(args.base.read_text())
    minutes = float(rows[-1].get(sm.TIME_ELAPSED, 0.0)) / 60 if rows else 0.0
    meta = run_meta("benchmarks.learning.judge_curve", argv, run=shown_path(args.run), base=shown_path(args.base))
    meta.update(steps=len(rows), minutes=minutes)
    points = curve(rows)
    section = report(points, base, meta)
    publish("judge_curve", {"meta": meta, "base": base, "curve": points}, section, MARKS, TITLE, not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
