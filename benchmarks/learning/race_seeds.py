"""Several seeds per arm: each arm's accuracy as a mean with its spread, its minutes to a target per seed, and
paired comparisons of two arms at matched minutes.

A seed's curve is the list of :class:`benchmarks.learning.curve.CurvePoint` of its checkpoints (the base at minute
0). Across seeds an arm is read at the same minutes (:func:`benchmarks.learning.curve.value_at`, linear between a
seed's checkpoints): the mean, the lowest and the highest seed.

The target is the reference arm's mean accuracy at the end of its budget. Each seed of each arm reaches it at some
minute (or never); the ratio to the reference is taken seed by seed (seed ``s`` of an arm against seed ``s`` of the
reference: the same training seed, problems and order), and a claim of "faster" holds only if it holds in every seed.

Worked example: the reference's two seeds end at 0.80 and 0.70, so the target is 0.75; they reach it at 30 and
never (None); an arm reaching it at 9 and 12 minutes has ratios 0.30 and None (the reference never got there, so
there is no ratio: "faster" cannot be claimed in that seed from a ratio).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.learning.curve import CurvePoint, minutes_to_reach, value_at
from benchmarks.learning.paired import Comparison, compare, outcomes, paired_outcomes


@dataclass(frozen=True)
class SeedSpread:
    """An arm's accuracy at ``minutes`` across its seeds: their mean, lowest and highest, and each seed's value."""

    minutes: float
    mean: float
    low: float
    high: float
    values: tuple[float, ...]


def spread_at(curves: Sequence[list[CurvePoint]], minutes: float, reading: str) -> SeedSpread:
    """Every seed's ``reading`` at ``minutes`` (read between its checkpoints) and their mean and range.

    >>> from benchmarks.learning.curve import CurvePoint as P
    >>> base = P(0, 0.0, 0.5, (0, 1), 0.5, (0, 1), 1.0, 200)
    >>> def at_10_min(end): return [base, P(8, 10.0, end, (0, 1), end, (0, 1), 1.0, 200)]
    >>> s = spread_at([at_10_min(0.7), at_10_min(0.9)], 5.0, "lenient")
    >>> round(s.mean, 3), round(s.low, 3), round(s.high, 3)
    (0.65, 0.6, 0.7)
    """
    values = tuple(value_at(c, minutes, reading) for c in curves)
    return SeedSpread(minutes, sum(values) / len(values), min(values), max(values), values)


def target(reference: Sequence[list[CurvePoint]], minutes: float, reading: str) -> float:
    """The reference arm's mean ``reading`` over its seeds at ``minutes`` (its budget): what the others race to."""
    return spread_at(reference, minutes, reading).mean


@dataclass(frozen=True)
class TimeToTarget:
    """An arm's minutes to the target in each seed (None: never within its budget) and the ratio to the reference
    arm's minutes in the same seed (None where either never reached it)."""

    minutes: tuple[float | None, ...]
    ratios: tuple[float | None, ...]

    @property
    def in_every_seed(self) -> bool:
        """Whether every seed has a ratio (both arms reached the target in every seed)."""
        return all(r is not None for r in self.ratios)

    def worst_ratio(self) -> float | None:
        """The largest ratio over the seeds (the claim that must hold in every one); None if a seed has none."""
        return max(self.ratios) if self.in_every_seed and self.ratios else None  # type: ignore[type-var]


def time_to_target(
    arm: Sequence[list[CurvePoint]], reference: Sequence[list[CurvePoint]], goal: float, reading: str
) -> TimeToTarget:
    """Seed by seed (the same index in both lists is the same training seed), the minutes each arm's curve
    first reaches ``goal`` and their ratio (module docstring's worked example)."""
    if len(arm) != len(reference):
        raise ValueError(f"{len(arm)} seeds against the reference's {len(reference)}: race the same seeds")
    ours = tuple(minutes_to_reach(c, goal, reading) for c in arm)
    theirs = tuple(minutes_to_reach(c, goal, reading) for c in reference)
    ratios = tuple(o / t if o is not None and t else None for o, t in zip(ours, theirs, strict=True))
    return TimeToTarget(ours, ratios)


def nearest_checkpoint(curve: list[CurvePoint], minutes: float) -> CurvePoint:
    """The checkpoint of ``curve`` (the base at minute 0 left out) nearest to ``minutes``."""
    trained = [p for p in curve if p.step > 0] or curve
    return min(trained, key=lambda p: abs(p.minutes - minutes))


def paired_at(responses_a: Path, responses_b: Path, reading: str = "strict") -> Comparison:
    """Two checkpoints' greedy responses on the same problems compared problem by problem as ``reading`` grades
    them (:func:`benchmarks.learning.paired.compare`: B - A with its paired bootstrap interval, McNemar's p)."""
    _, a, b = paired_outcomes(outcomes(responses_a, 0, reading), outcomes(responses_b, 0, reading))
    return compare(a, b)
