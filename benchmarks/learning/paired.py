"""Two evaluations of the same problems compared problem by problem: the difference of their accuracies with a
paired bootstrap interval, and the exact McNemar test on the problems only one of them solved.

    python -m benchmarks.learning.paired A.jsonl B.jsonl [--sample 0] [--bands] [--reading strict|lenient]

``A.jsonl`` and ``B.jsonl`` are response records (a run's ``validation/step_NNNNNN.jsonl``, or ``driver.evaluate
--responses``): one line per response with ``uid``, ``sample`` (0: greedy) and ``correct``. Both must hold the same
problems. ``--reading lenient`` compares the lenient grades (``correct_lenient``). Prints the accuracies, the
difference B - A with its 95% interval, the discordant counts and McNemar's p-value; ``--bands`` adds the same by
band of two-term sums (:mod:`benchmarks.learning.sum_bands`).

Why paired: both evaluations answer the same problems, so most of the spread of each accuracy (which problems
were drawn) is shared and cancels in the difference; comparing two independent intervals overstates the noise.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """The two-sided exact McNemar p-value: the problems only A solved and only B solved, under "each discordant
    problem is a fair coin". ``p = min(1, 2 * P(X <= min(only_a, only_b)))`` with ``X ~ Binomial(only_a + only_b,
    1/2)``; 1.0 with no discordant problem.

    Worked example: 1 against 9 discordant problems gives ``2 * (1 + 10) / 2**10 = 0.021484375``.

    >>> mcnemar_exact(1, 9)
    0.021484375
    >>> mcnemar_exact(5, 5), mcnemar_exact(0, 0)
    (1.0, 1.0)
    """
    n, k = only_a + only_b, min(only_a, only_b)
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired_bootstrap(
    a: Sequence[bool], b: Sequence[bool], draws: int = 10_000, seed: int = 0
) -> tuple[float, float, float]:
    """The difference of accuracies ``mean(b) - mean(a)`` and its 95% percentile interval, resampling problems
    (each draw takes the same problems for both, so what they share cancels).

    >>> paired_bootstrap([True, False, True, False], [True, False, True, False])
    (0.0, 0.0, 0.0)
    """
    if len(a) != len(b) or not a:
        raise ValueError(f"paired_bootstrap: {len(a)} and {len(b)} outcomes; both need the same problems, at least 1")
    diff = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(draws, len(diff)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(diff.mean()), float(low), float(high)


@dataclass(frozen=True)
class Comparison:
    """A and B on the same ``problems``: accuracies, B - A with its interval, discordant counts, McNemar's p."""

    problems: int
    accuracy_a: float
    accuracy_b: float
    difference: float
    low: float
    high: float
    only_a: int
    only_b: int
    p_value: float


def compare(a: Sequence[bool], b: Sequence[bool], seed: int = 0) -> Comparison:
    """Both tests on outcomes ``a`` and ``b`` of the same problems, in the same order."""
    difference, low, high = paired_bootstrap(a, b, seed=seed)
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    return Comparison(
        len(a), sum(a) / len(a), sum(b) / len(b), difference, low, high, only_a, only_b, mcnemar_exact(only_a, only_b)
    )


# The grade each reading reads in a response record: strict (the answer where the prompt asked for it) or lenient.
GRADE_KEYS = {"strict": "correct", "lenient": "correct_lenient"}


def outcomes(path: Path, sample: int = 0, reading: str = "strict") -> dict[str, tuple[str, bool]]:
    """``{uid: (question, correct)}`` of ``sample`` (0: the greedy response) in the response records at ``path``,
    graded as ``reading`` (:data:`GRADE_KEYS`)."""
    found = {}
    key = GRADE_KEYS[reading]
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if int(record["sample"]) == sample:
            found[str(record["uid"])] = (str(record["question"]), bool(record[key]))
    return found


def paired_outcomes(
    a: dict[str, tuple[str, bool]], b: dict[str, tuple[str, bool]]
) -> tuple[list[str], list[bool], list[bool]]:
    """The questions and both outcomes in one order; ValueError naming the count when the problems differ."""
    if set(a) != set(b):
        raise ValueError(
            f"the two evaluations hold different problems ({len(set(a) - set(b))} only in A, "
            f"{len(set(b) - set(a))} only in B): evaluate both on the same split"
        )
    uids = sorted(a)
    return [a[u][0] for u in uids], [a[u][1] for u in uids], [b[u][1] for u in uids]


def comparison_line(name: str, c: Comparison) -> str:
    return (
        f"| {name} | {c.problems} | {c.accuracy_a:.3f} | {c.accuracy_b:.3f} | {c.difference:+.3f} "
        f"[{c.low:+.3f}, {c.high:+.3f}] | {c.only_a} / {c.only_b} | {c.p_value:.3g} |"
    )


def report(a_path: Path, b_path: Path, sample: int = 0, bands: bool = False, reading: str = "strict") -> list[str]:
    """The Markdown table of :func:`compare` on the two files, the whole set first, then each band present."""
    from benchmarks.learning.sum_bands import BANDS, sum_band

    questions, a, b = paired_outcomes(outcomes(a_path, sample, reading), outcomes(b_path, sample, reading))
    lines = [
        "| problems | n | A | B | B - A [95%] | only A / only B | McNemar p |",
        "|---|---|---|---|---|---|---|",
        comparison_line("all", compare(a, b)),
    ]
    if bands:
        by_band = [sum_band(q) for q in questions]
        for band in BANDS:
            picked = [i for i, name in enumerate(by_band) if name == band]
            if picked:
                lines.append(comparison_line(band, compare([a[i] for i in picked], [b[i] for i in picked])))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--sample", type=int, default=0, help="which response of each problem (0: greedy)")
    parser.add_argument("--bands", action="store_true", help="also by band of two-term sums")
    parser.add_argument("--reading", choices=list(GRADE_KEYS), default="strict", help="which grade to compare")
    args = parser.parse_args(argv)
    try:
        lines = report(args.a, args.b, args.sample, args.bands, args.reading)
    except (ValueError, OSError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
