"""Validation: greedy accuracy, pass@k and mean@k on held-out problems (pure: no Ray).

``metrics`` holds the estimators, ``generation`` the greedy + ``k`` sampled responses per problem and their
row layout, ``report`` the step from graded rows to the ``val/*`` metrics. The trainer runs them through its
roles (``driver/validation.py``); ``python -m driver.evaluate`` runs them in one process.
"""

from relay.evaluation.generation import (
    GRADE_INPUTS,
    generate_for_validation,
    greedy_settings,
    split_correctness,
    validation_rows,
)
from relay.evaluation.metrics import (
    difference_interval,
    mean_at_k,
    pass_at_k,
    summarize_validation,
    wilson_interval,
)
from relay.evaluation.report import GRADE_CHUNK_ROWS, grading_chunks, response_records, validation_metrics

__all__ = [
    "GRADE_CHUNK_ROWS",
    "GRADE_INPUTS",
    "difference_interval",
    "generate_for_validation",
    "grading_chunks",
    "greedy_settings",
    "mean_at_k",
    "pass_at_k",
    "response_records",
    "split_correctness",
    "summarize_validation",
    "validation_metrics",
    "validation_rows",
    "wilson_interval",
]
