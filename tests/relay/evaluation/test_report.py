"""relay.evaluation.report: the metrics of each source of a validation that mixes tasks."""

import numpy as np


def test_per_source_metrics_golden() -> None:
    from relay.evaluation.report import per_source_metrics

    sources = np.array(["gsm8k", "math", "math"], dtype=object)
    greedy = np.array([True, False, True])
    samples = np.array([[True, False], [False, False], [False, True]])
    assert per_source_metrics(sources, greedy, samples) == {
        "val/gsm8k/accuracy_greedy": 1.0,
        "val/gsm8k/pass@2": 1.0,
        "val/gsm8k/mean@2": 0.5,
        "val/gsm8k/problems": 1.0,
        "val/math/accuracy_greedy": 0.5,
        "val/math/pass@2": 0.5,
        "val/math/mean@2": 0.25,
        "val/math/problems": 2.0,
    }
