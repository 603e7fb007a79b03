"""A fingerprint of what a run computed, to check that two runs on the same seed computed the same thing.

    python -m relay.run.digest outputs/<run A> [outputs/<run B> ...]

Prints one line per run: the SHA-256 of every step's metrics in ``metrics.jsonl`` except those that measure the
machine rather than the computation (wall times, rates, memory, recoveries and counts of the process such as
compilations: :func:`measured`), written with ``repr`` floats so that equal digests mean bitwise-equal values.
With two or more runs it also names the first metric that differs and exits 1 when the digests differ.

Worked example: a step ``{"step": 0, "reward/mean": 0.25, "timing/step": 41.2}`` is hashed as
``{"reward/mean": 0.25, "step": 0}``: the step time of a rerun may differ, its reward may not.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from relay.metrics import system as sm
from relay.metrics.catalog import lookup
from relay.run.sinks import METRICS_NAME

# Metric families, units and names that measure the machine, not the computation: times, rates, memory, and the
# recoveries (a step whose rollout actor was restarted computes the same values, one restart later). The units and
# the figures of the process (``machine``) are the catalog's (relay/metrics); the suffixes cover undeclared keys.
MEASURED_PREFIXES = (sm.TIMING_PREFIX, sm.THROUGHPUT_PREFIX, sm.MEMORY_PREFIX, sm.TIME_PREFIX, sm.RECOVERY_PREFIX)
MEASURED_UNITS = ("s", "GiB", "tokens/s", "items/s")
MEASURED_SUFFIXES = ("seconds", "_gib", "_per_s")


def measured(key: str) -> bool:
    """Whether ``key`` is a wall time, rate or memory figure (left out of the digest).

    >>> measured("timing/step"), measured("sync/export_seconds"), measured("recovery/restarts"), measured("reward/mean")
    (True, True, True, False)
    >>> measured("agent/tool_latency_p50_s"), measured("learner/compiles_count")  # in seconds; of the process
    (True, True)
    """
    entry = lookup(key)
    by_catalog = entry is not None and (entry.machine or entry.unit in MEASURED_UNITS)
    return by_catalog or key.startswith(MEASURED_PREFIXES) or key.endswith(MEASURED_SUFFIXES)


def computed_metrics(run_dir: Path) -> list[dict[str, float]]:
    """Each step's metrics without the measured ones, in file order."""
    path = Path(run_dir) / METRICS_NAME
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{k: v for k, v in sorted(row.items()) if not measured(k)} for row in rows]


def digest(rows: list[dict[str, float]]) -> str:
    """SHA-256 of the rows, floats by ``repr`` (round-trip exact)."""
    text = "\n".join(repr(sorted(row.items())) for row in rows)
    return hashlib.sha256(text.encode()).hexdigest()


def differences(a: list[dict[str, float]], b: list[dict[str, float]]) -> list[str]:
    """Every metric whose value differs between two runs' computed rows, one ``"step S key: A != B"`` each (a
    step count that differs is one entry). Names the keys, not a truncated dict, where a test compares runs.

    >>> differences([{"step": 0, "loss": 0.5, "kl": 0.0}], [{"step": 0, "loss": 0.25, "kl": 0.0}])
    ['step 0 loss: 0.5 != 0.25']
    """
    if len(a) != len(b):
        return [f"{len(a)} steps != {len(b)} steps"]
    found = []
    for row_a, row_b in zip(a, b, strict=True):
        for key in sorted(set(row_a) | set(row_b)):
            if row_a.get(key) != row_b.get(key):
                found.append(f"step {row_a.get(sm.STEP)} {key}: {row_a.get(key)!r} != {row_b.get(key)!r}")
    return found


def first_difference(a: list[dict[str, float]], b: list[dict[str, float]]) -> str | None:
    """``"step 2 actor/loss: 0.01 != 0.02"`` for the first differing metric, or None when they are equal."""
    found = differences(a, b)
    return found[0] if found else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Relay: a digest of what a run computed (not how fast)")
    p.add_argument("runs", nargs="+", type=Path, help="run directories (outputs/<run>)")
    args = p.parse_args(argv)
    rows = [computed_metrics(run) for run in args.runs]
    for run, steps in zip(args.runs, rows, strict=True):
        print(f"{digest(steps)}  {run} ({len(steps)} steps)")
    differences = [first_difference(rows[0], other) for other in rows[1:]]
    for run, difference in zip(args.runs[1:], differences, strict=True):
        if difference is not None:
            print(f"{run} differs from {args.runs[0]}: {difference}", file=sys.stderr)
    return 1 if any(d is not None for d in differences) else 0


if __name__ == "__main__":
    sys.exit(main())
