"""Validation metrics: greedy accuracy, the unbiased pass@k estimator and mean@k.

Worked example: 2 problems, greedy answers right/wrong, 2 samples each: ``[[True, False], [False, False]]``
gives ``val/accuracy_greedy = 0.5``, ``val/pass@2 = 0.5`` (one problem solved at least once),
``val/mean@2 = 0.25`` (1 correct sample out of 4) and ``val/problems = 2``.
"""

from __future__ import annotations

import numpy as np


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
    """
    greedy = _as_bool(correct_greedy, 1, "correct_greedy")
    samples = _as_bool(correct_samples, 2, "correct_samples")
    problems, k = samples.shape
    if len(greedy) != problems:
        raise ValueError(f"correct_greedy has {len(greedy)} problems but correct_samples has {problems}")
    if problems == 0 or k == 0:
        raise ValueError(f"summarize_validation: need at least one problem and one sample, got shape {samples.shape}")
    per_problem = [pass_at_k(k, int(c), k) for c in samples.sum(axis=1)]
    return {
        "val/accuracy_greedy": float(greedy.mean()),
        f"val/pass@{k}": float(np.mean(per_problem)),
        f"val/mean@{k}": mean_at_k(samples),
        "val/problems": float(problems),
    }


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
