"""Validation metrics: greedy accuracy, the unbiased pass@k estimator, mean@k and the majority baseline.

Worked example: 2 problems, greedy answers right/wrong, 2 samples each: ``[[True, False], [False, False]]``
gives ``val/accuracy_greedy = 0.5``, ``val/pass@2 = 0.5`` (one problem solved at least once),
``val/mean@2 = 0.25`` (1 correct sample out of 4) and ``val/problems = 2``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from relay.metrics import validation as vm


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021) from ``n`` samples of which ``c`` are correct.

    ``1 - C(n-c, k) / C(n, k)``: the chance that ``k`` of the ``n`` samples, drawn without replacement,
    contain at least one correct one. Computed as ``1 - prod_{i=n-c+1}^{n} (1 - k/i)``, which never forms
    the (huge) binomials.

    Worked examples: ``pass_at_k(4, 1, 2) = 1 - C(3,2)/C(4,2) = 1 - 3/6 = 0.5``;
    ``pass_at_k(5, 2, 3) = 1 - C(3,3)/C(5,3) = 1 - 1/10 = 0.9``; ``pass_at_k(n, 0, k) = 0``;
    ``pass_at_k(n, c, 1) = c / n``; and 1 whenever ``n - c < k`` (every draw of ``k`` holds a correct one).
    """
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k: need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k: need 1 <= k <= n, got n={n}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def mean_at_k(correct: np.ndarray) -> float:
    """mean@k: the mean correctness over every problem's ``k`` samples (``correct`` is ``[P, k]`` bool).

    It is also the unbiased pass@1 estimate. Worked example: ``[[1, 0, 0, 0], [1, 1, 0, 0]]`` -> 3/8 = 0.375.
    """
    correct = _as_bool(correct, 2, "correct")
    return float(correct.mean())


def summarize_validation(correct_greedy: np.ndarray, correct_samples: np.ndarray) -> dict[str, float]:
    """The ``val/*`` metrics of one validation run.

    ``correct_greedy`` is ``[P]`` bool (the greedy answer of each problem is right), ``correct_samples`` is
    ``[P, k]`` bool (each of ``k`` samples at the rollout temperature). Returns ``val/accuracy_greedy``,
    ``val/pass@k`` (mean over problems of :func:`pass_at_k` with ``n = k``: solved by at least one sample),
    ``val/mean@k`` and ``val/problems``, with the number ``k`` in the key names.

    Worked example (k=2): greedy ``[True, False, False]``, samples ``[[True, False], [False, True], [False, False]]``
    -> ``{"val/accuracy_greedy": 1/3, "val/pass@2": 2/3, "val/mean@2": 2/6, "val/problems": 3.0}``.
    With ``k = 0`` (samples ``[P, 0]``: greedy only) just ``val/accuracy_greedy`` and ``val/problems``.
    """
    greedy = _as_bool(correct_greedy, 1, "correct_greedy")
    samples = _as_bool(correct_samples, 2, "correct_samples")
    problems, k = samples.shape
    if len(greedy) != problems:
        raise ValueError(f"correct_greedy has {len(greedy)} problems but correct_samples has {problems}")
    if problems == 0:
        raise ValueError(f"summarize_validation: need at least one problem, got shape {samples.shape}")
    if k == 0:  # greedy only
        return {vm.VAL_ACCURACY: float(greedy.mean()), vm.VAL_PROBLEMS: float(problems)}
    per_problem = [pass_at_k(k, int(c), k) for c in samples.sum(axis=1)]
    return {
        vm.VAL_ACCURACY: float(greedy.mean()),
        vm.VAL_PASS_AT_K.format(k=k): float(np.mean(per_problem)),
        vm.VAL_MEAN_AT_K.format(k=k): mean_at_k(samples),
        vm.VAL_PROBLEMS: float(problems),
    }


def majority_baseline(answers: Sequence[str]) -> float:
    """The accuracy of always giving the split's most common answer: its count over the number of problems.

    A task whose answers repeat (a yes/no task, sums of small numbers) can look learned when a model only
    learned its most common answer; held-out accuracy means something only above this. Worked example:
    ``["8", "8", "3", "5"]`` -> 0.5; all different -> ``1 / len(answers)``.
    """
    if not answers:
        raise ValueError("majority_baseline: no answers")
    return max(Counter(str(a).strip() for a in answers).values()) / len(answers)


def wilson_interval(successes: int, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval (95% by default) of a binomial proportion ``successes / trials``.

    Better than the normal approximation near 0 and 1, where GSM8K accuracies of small models sit:
    it never leaves [0, 1] and is not empty at 0 successes. With ``p = s/n`` and ``z = 1.96``:
    ``centre = (p + z²/2n) / (1 + z²/n)``, ``half = z·sqrt(p(1-p)/n + z²/4n²) / (1 + z²/n)``.

    Worked examples: ``wilson_interval(0, 200) = (0.0, 0.0188)``; ``wilson_interval(10, 200) =
    (0.0274, 0.0897)`` (5% measured on 200 problems); ``wilson_interval(50, 100) = (0.4038, 0.5962)``;
    ``wilson_interval(200, 200) = (0.9812, 1.0)``.
    """
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"wilson_interval: need 0 <= successes <= trials and trials >= 1, got {successes}/{trials}")
    p = successes / trials
    z2 = z * z
    denom = 1.0 + z2 / trials
    centre = (p + z2 / (2 * trials)) / denom
    half = z * np.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / denom
    # The interval holds p; at p = 0 or 1 rounding would otherwise leave it a hair short (1 - 1e-16).
    return float(min(p, max(0.0, centre - half))), float(max(p, min(1.0, centre + half)))


def difference_interval(s1: int, n1: int, s2: int, n2: int) -> tuple[float, float, float]:
    """``(p1 - p2, low, high)``: the difference of two proportions and its 95% Newcombe (hybrid Wilson) interval.

    ``low = d - sqrt((p1 - l1)² + (u2 - p2)²)`` and ``high = d + sqrt((u1 - p1)² + (p2 - l2)²)`` with
    ``(l, u)`` the :func:`wilson_interval` of each proportion. An interval that holds 0 means the difference is
    within noise. It treats the two samples as independent; on the same problems (paired) it is conservative.

    Worked example: 12/200 vs 6/200 -> ``d = 0.03``, interval ``(-0.0123, 0.0749)``: within noise;
    60/200 vs 20/200 -> ``(0.2, 0.1229, 0.2751)``.
    """
    p1, p2 = s1 / n1, s2 / n2
    l1, u1 = wilson_interval(s1, n1)
    l2, u2 = wilson_interval(s2, n2)
    d = p1 - p2
    low = d - float(np.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2))
    high = d + float(np.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2))
    return d, low, high


def _as_bool(values: np.ndarray, ndim: int, name: str) -> np.ndarray:
    """``values`` as a bool array of ``ndim`` dimensions (0/1 floats accepted), else ValueError naming it."""
    array = np.asarray(values)
    if array.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {array.shape}")
    if array.dtype != bool:
        if not np.isin(array, (0, 1)).all():
            raise ValueError(f"{name} must hold booleans or 0/1, got values {np.unique(array)[:5]}")
        array = array.astype(bool)
    return array
