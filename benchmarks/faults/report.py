"""What a fault-injection campaign (:mod:`benchmarks.faults.chaos`) found: each fault's outcome, the verdict's name for
it, and the table of faults tried per point and how each ended, over one campaign or several.

    python -m benchmarks.faults.report outputs/chaos-a/chaos.jsonl outputs/chaos-b/chaos.jsonl

prints one table over every fault those records hold (each campaign appends its outcomes to its ``chaos.jsonl``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path

from relay.faults import Fault


@dataclass(frozen=True)
class Injection:
    """One fault of a campaign: a fault point armed in the run, or (``corruption``) a driver kill between steps
    followed by damage to the newest checkpoint before the resume."""

    index: int
    fault: Fault
    corruption: str | None = None
    mutation: str | None = None  # a known-bad recovery the run carries (benchmarks/faults/mutations.py)
    follow_up: Fault | None = None  # a second fault, inside the recovery the first sets off (Fault.after)

    @property
    def faults(self) -> tuple[Fault, ...]:
        return (self.fault,) if self.follow_up is None else (self.fault, self.follow_up)

    @property
    def label(self) -> str:
        """The fault column of the report, e.g. ``kill``, ``kill, then flip a file``, ``kill, then kill in
        learner.load_checkpoint``."""
        if self.corruption:
            return f"kill, then {self.corruption} a file"
        if self.follow_up is not None:
            return f"{self.fault.action}, then {self.follow_up.action} in {self.follow_up.point}"
        return self.fault.action


@dataclass
class Outcome:
    """What one injection did: each attempt's exit code, whether the fault fired, and the verdict's parts."""

    injection: Injection
    exits: list[int] = field(default_factory=list)
    fired: bool = False  # every fault of the injection delivered (its ``.sent`` marker written)
    hung: bool = False
    traceback_tail: bool = False
    unexplained_exit: bool = False  # an exit 1 without Relay's error line and how to resume (or that it cannot)
    digest_equal: bool = False
    weights_equal: bool = False
    optimizer_steps_equal: bool = False
    cursor_equal: bool = False
    restarts: float = 0.0
    nodes_lost: int = 0  # raylets found dead after the run (and replaced): a kill_node that took its node down
    heads_restarted: int = 0  # Ray heads started again between attempts: a kill_gcs that took the cluster down
    # the comparisons that differ, each with where (benchmarks.faults.run_dir.differences); records written before
    # the optimizer state, the kept checkpoints and the export were compared have none
    differs: list[str] = field(default_factory=list)
    from_scratch: bool = False  # an attempt after the first started the run anew (no checkpoint, or exit 2)
    note: str = ""  # for "no effect": when the fault was delivered, and that nothing failed or restarted after it
    unexplained_no_effect: bool = (
        False  # delivered, nothing recovered, and not in the run's last work: a hidden restart
    )

    @property
    def ok(self) -> bool:
        return not self.caught_by

    @property
    def caught_by(self) -> list[str]:
        """Why the verdict fails this run (empty: it passes): each comparison that differs, a hang, a traceback at
        the end, an exit 1 that did not explain itself, or a run that never completed."""
        found = list(self.differs)
        equal = {
            "metrics": self.digest_equal,
            "policy": self.weights_equal,
            "optimizer_steps": self.optimizer_steps_equal,
            "cursor": self.cursor_equal,
        }
        if not self.exits or self.exits[-1] != 0:
            found.append(f"exit {self.exits[-1] if self.exits else None}")
        else:
            found += [name for name, same in equal.items() if not same and not any(d.startswith(name) for d in found)]
        flags = {
            "hang": self.hung,
            "traceback": self.traceback_tail,
            "unexplained exit 1": self.unexplained_exit,
            "no effect, unexplained": self.unexplained_no_effect,
        }
        return found + [name for name, raised in flags.items() if raised]

    @property
    def recovered_by(self) -> str:
        """``relay`` (one attempt, with a recovery counted or a node lost under it), ``resume`` (more attempts, each
        resumed from a checkpoint), ``from scratch`` (an attempt started the run anew: no checkpoint to resume from,
        or ``--resume`` refused with exit 2), ``no effect`` (it fired after the work it aimed at: one attempt, nothing
        recovered), ``not reached`` (it never fired, and the run equals the undisturbed one) or ``failed`` (whether
        or not it fired: a run that differs, hangs or ends in a traceback fails)."""
        if not self.ok:
            return "failed"
        if not self.fired:
            return "not reached"
        if self.from_scratch:
            return "from scratch"
        if len(self.exits) > 1:
            return "resume"
        return "relay" if self.restarts > 0 or self.nodes_lost else "no effect"


OUTCOMES = ("relay", "resume", "from scratch", "no effect", "failed", "not reached")


def mutation_report(outcomes: list[Outcome]) -> list[str]:
    """A markdown table of the known-bad recoveries: each mutation, the fault that led into it, whether the verdict
    caught it (the run "failed") and which comparisons did."""
    from benchmarks.faults.mutations import MUTATIONS

    lines = ["| mutation | what goes wrong | fault | caught | caught by |", "|---|---|---|---|---|"]
    for o in outcomes:
        f, name = o.injection.fault, o.injection.mutation
        caught = "yes" if o.recovered_by == "failed" else "**no**"
        what = MUTATIONS[name].what if name in MUTATIONS else ""
        fault = f"{f.point} {f.action} at step {f.step}"
        lines.append(f"| {name} | {what} | {fault} | {caught} | {'; '.join(o.caught_by) or '-'} |")
    return lines


def report(outcomes: list[Outcome]) -> list[str]:
    """A markdown table: faults tried per point and action, and how each ended."""
    rows: dict[tuple[str, str], Counter] = {}
    for o in outcomes:
        rows.setdefault((o.injection.fault.point, o.injection.label), Counter())[o.recovered_by] += 1
    lines = [
        "| point | fault | tried | recovered by Relay | recovered by --resume | from scratch | no effect | failed "
        "| not reached |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (point, action), c in sorted(rows.items()):
        counts = " | ".join(str(c[k]) for k in OUTCOMES)
        lines.append(f"| {point} | {action} | {sum(c.values())} | {counts} |")
    return lines


def read_outcomes(record: Path) -> list[Outcome]:
    """The outcomes a campaign's ``chaos.jsonl`` holds (its first line, the campaign's seed and reference, aside)."""
    outcomes = []
    names = {f.name for f in fields(Outcome)} - {"injection"}
    for line in record.read_text().splitlines():
        row = json.loads(line) if line.strip() else {}
        if "injection" not in row:
            continue
        drawn = row["injection"]
        follow_up = Fault(**drawn["follow_up"]) if drawn.get("follow_up") else None
        fault = Fault(**drawn["fault"])
        injection = Injection(drawn["index"], fault, drawn["corruption"], drawn.get("mutation"), follow_up)
        outcomes.append(Outcome(injection, **{k: v for k, v in row.items() if k in names}))
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.faults.report", description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", type=Path, help="campaigns' chaos.jsonl files")
    records = parser.parse_args(argv).records
    missing = [str(r) for r in records if not r.is_file()]
    if missing:
        parser.error(f"no campaign record at {', '.join(missing)}: give the chaos.jsonl a campaign wrote (--out)")
    outcomes = [o for record in records for o in read_outcomes(record)]
    faults = [o for o in outcomes if o.injection.mutation is None]
    mutants = [o for o in outcomes if o.injection.mutation is not None]
    if faults:
        print("\n".join(report(faults)))
    if mutants:
        print("\n".join(mutation_report(mutants)))
    missed = sum(o.recovered_by != "failed" for o in mutants)
    if missed:
        print(f"{missed} of {len(mutants)} known-bad recoveries passed the verdict: holes in it", file=sys.stderr)
    failed = sum(o.recovered_by == "failed" for o in faults)
    print(f"{len(faults)} faults from {len(records)} campaigns, {failed} failed", file=sys.stderr)
    return 1 if failed or missed else 0


if __name__ == "__main__":
    sys.exit(main())
