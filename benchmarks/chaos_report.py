"""What a fault-injection campaign (:mod:`benchmarks.chaos`) found: each fault's outcome, the verdict's name for it,
and the table of faults tried per point and how each ended, over one campaign or several.

    python -m benchmarks.chaos_report outputs/chaos-a/chaos.jsonl outputs/chaos-b/chaos.jsonl

prints one table over every fault those records hold (each campaign appends its outcomes to its ``chaos.jsonl``).
"""

from __future__ import annotations

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


@dataclass
class Outcome:
    """What one injection did: each attempt's exit code, whether the fault fired, and the verdict's parts."""

    injection: Injection
    exits: list[int] = field(default_factory=list)
    fired: bool = False
    hung: bool = False
    traceback_tail: bool = False
    unexplained_exit: bool = False  # an exit 1 without Relay's error line and how to resume (or that it cannot)
    digest_equal: bool = False
    weights_equal: bool = False
    optimizer_steps_equal: bool = False
    cursor_equal: bool = False
    restarts: float = 0.0
    nodes_lost: int = 0  # raylets found dead after the run (and replaced): a kill_node that took its node down

    @property
    def ok(self) -> bool:
        completed = bool(self.exits) and self.exits[-1] == 0
        equal = self.digest_equal and self.weights_equal and self.optimizer_steps_equal and self.cursor_equal
        return completed and equal and not (self.hung or self.traceback_tail or self.unexplained_exit)

    @property
    def recovered_by(self) -> str:
        """``relay`` (one attempt, with a recovery counted or a node lost under it), ``resume`` (more attempts),
        ``no effect`` (it fired after the work it aimed at: one attempt, nothing recovered), ``not reached`` (it
        never fired) or ``failed``."""
        if not self.fired:
            return "not reached"
        if not self.ok:
            return "failed"
        if len(self.exits) > 1:
            return "resume"
        return "relay" if self.restarts > 0 or self.nodes_lost else "no effect"


def report(outcomes: list[Outcome]) -> list[str]:
    """A markdown table: faults tried per point and action, and how each ended."""
    rows: dict[tuple[str, str], Counter] = {}
    for o in outcomes:
        action = o.injection.corruption and f"kill, then {o.injection.corruption} a file" or o.injection.fault.action
        rows.setdefault((o.injection.fault.point, action), Counter())[o.recovered_by] += 1
    lines = [
        "| point | fault | tried | recovered by Relay | recovered by --resume | no effect | failed | not reached |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (point, action), c in sorted(rows.items()):
        counts = " | ".join(str(c[k]) for k in ("relay", "resume", "no effect", "failed", "not reached"))
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
        injection = Injection(drawn["index"], Fault(**drawn["fault"]), drawn["corruption"])
        outcomes.append(Outcome(injection, **{k: v for k, v in row.items() if k in names}))
    return outcomes


def main(argv: list[str] | None = None) -> int:
    records = [Path(a) for a in (sys.argv[1:] if argv is None else argv)]
    if not records:
        print("usage: python -m benchmarks.chaos_report CHAOS_JSONL ...", file=sys.stderr)
        return 2
    outcomes = [o for record in records for o in read_outcomes(record)]
    print("\n".join(report(outcomes)))
    failed = sum(o.recovered_by == "failed" for o in outcomes)
    print(f"{len(outcomes)} faults from {len(records)} campaigns, {failed} failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
