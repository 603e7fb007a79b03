"""The race's records: each arm's run in each seed kept in the repository, so a race of arms x seeds x budget (hours
on two cores) is run a few arms at a time, on different days, and read as one.

A race's records live in ``benchmarks/results/race/<race>/``, where ``<race>`` names everything the runs must share
to be compared (:func:`race_key`: the preset, the split, the budget and the number of problems, e.g.
``arithmetic_smollm2_test_30min_200p``). In it:

- ``<arm>_seed<seed>.json``: the run's curve (the base first), each checkpoint's evaluation name, or the error of
  an arm that did not run here, with where and when it ran (:func:`save_run`);
- ``responses/<evaluation>.jsonl.gz``: that evaluation's greedy answer to every problem, graded strict and lenient
  (the fields the paired tests and the bands read, the expected answer and the response text).

:func:`load_run` gives a recorded run back and puts its responses where the race reads them (``OUT``), so a race
continued on a fresh clone trains only the runs it has no record of. Delete a record to run it again.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.learning.curve import CurvePoint
from benchmarks.learning.relay_vs_trl import responses_file
from relay.repo import REPO_ROOT
from relay.sft.worked_sums import expected_answer

RECORDS = REPO_ROOT / "benchmarks" / "results" / "race"
# What a record keeps of each response (driver.evaluate's --responses lines), the expected answer beside them.
KEPT_FIELDS = ("uid", "sample", "question", "response", "correct", "correct_lenient", "finished", "response_tokens")


def race_key(preset: str, dev: bool, minutes: float, problems: int) -> str:
    """The folder name of one race's records: runs in different folders are never read together.

    >>> race_key("arithmetic_smollm2", False, 30.0, 200), race_key("arithmetic_smollm2", True, 7.5, 50)
    ('arithmetic_smollm2_test_30min_200p', 'arithmetic_smollm2_dev_7.5min_50p')
    """
    return f"{preset}_{'dev' if dev else 'test'}_{minutes:g}min_{problems}p"


def save_responses(out: Path, name: str, folder: Path) -> None:
    """The evaluation ``name``'s response records in ``out``, compacted and gzipped into ``folder/responses``."""
    lines = []
    for line in responses_file(out, name).read_text().splitlines():
        record = json.loads(line)
        kept = {k: record[k] for k in KEPT_FIELDS if k in record}
        kept["answer"] = expected_answer(str(record.get("ground_truth", "")))
        lines.append(json.dumps(kept) + "\n")
    target = folder / "responses" / f"{name}.jsonl.gz"
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:  # same answers, same bytes
        f.write("".join(lines).encode())


def restore_responses(folder: Path, name: str, out: Path) -> None:
    """The recorded evaluation ``name`` back in ``out`` where :func:`responses_file` finds it."""
    source = folder / "responses" / f"{name}.jsonl.gz"
    if not source.is_file():
        raise SystemExit(f"{source}: missing, though a record names it; delete the record to run it again")
    with gzip.open(source, "rt") as f:
        responses_file(out, name).write_text(f.read())


def run_path(folder: Path, arm: str, seed: int) -> Path:
    """Where the record of ``arm``'s run in ``seed`` is."""
    return folder / f"{arm}_seed{seed}.json"


def save_base(base: CurvePoint, out: Path, folder: Path, meta: dict[str, Any]) -> None:
    """Record the base model's evaluation (``eval_base``) in ``folder``."""
    save_responses(out, "eval_base", folder)
    (folder / "base.json").write_text(json.dumps({"base": asdict(base), "meta": meta}, indent=1) + "\n")


def load_base(folder: Path, out: Path) -> CurvePoint | None:
    """The recorded base evaluation (its responses restored into ``out``), or None when there is none."""
    path = folder / "base.json"
    if not path.is_file():
        return None
    restore_responses(folder, "eval_base", out)
    return curve_point(json.loads(path.read_text())["base"])


def save_run(run: Any, out: Path, folder: Path, meta: dict[str, Any]) -> Path:
    """Record ``run`` (a :class:`benchmarks.learning.race.ArmSeed`) and its evaluations' responses in ``folder``."""
    for name in run.evaluations.values():
        save_responses(out, name, folder)
    path = run_path(folder, run.arm, run.seed)
    path.write_text(json.dumps({"run": asdict(run), "meta": meta}, indent=1, default=str) + "\n")
    return path


def load_run(folder: Path, arm: str, seed: int, out: Path) -> dict[str, Any] | None:
    """The recorded run of ``arm`` in ``seed`` as :func:`save_run` wrote it (its responses restored into ``out``,
    its curve as :class:`CurvePoint`), or None when there is none."""
    path = run_path(folder, arm, seed)
    if not path.is_file():
        return None
    run = json.loads(path.read_text())["run"]
    run["curve"] = [curve_point(p) for p in run["curve"]]
    run["evaluations"] = {int(step): name for step, name in run["evaluations"].items()}
    for name in run["evaluations"].values():
        restore_responses(folder, name, out)
    return run


def curve_point(fields: dict[str, Any]) -> CurvePoint:
    """A :class:`CurvePoint` from its JSON fields (intervals come back as lists)."""
    return CurvePoint(**{**fields, "strict_ci": tuple(fields["strict_ci"]), "lenient_ci": tuple(fields["lenient_ci"])})
