"""Validation during training (driver side): the rollout replicas generate, the reward role grades.

``run_validation`` sends each rollout replica a consecutive share of the validation prompts
(``RolloutWorker.evaluate``: one greedy response and ``k`` samples per problem), stacks the rows back in
order, grades them with the reward actor in chunks of ``GRADE_CHUNK_ROWS`` rows (one chunk is one
``reward.timeout_s`` budget), and turns the grades into the ``val/*`` metrics of :mod:`relay.evaluation`.
"""

from __future__ import annotations

import time

from driver import fanout
from driver.launch import Roles, call
from relay.data_proto import DataProto
from relay.evaluation import GRADE_CHUNK_ROWS, grading_chunks, validation_metrics
from relay.rollout_batch import split_rows


def run_validation(
    roles: Roles,
    val_prompts: DataProto,
    k: int,
    step: int,
    *,
    seed: int = 0,
    grade_chunk: int = GRADE_CHUNK_ROWS,
) -> dict[str, float]:
    """The ``val/*`` metrics of the current policy on ``val_prompts`` (see
    :func:`relay.data.prompt_source.validation_prompts`), with ``k`` samples per problem.

    ``step`` only names the phase in errors. The samples' seed is ``seed`` at every validation (the same
    random streams each time, so changes between validations come from the weights); with vLLM a problem
    draws the same seeds whatever the number of replicas (replica shares are offset by ``start * k``).

    Returns ``val/accuracy_greedy``, ``val/pass@<k>``, ``val/mean@<k>``, ``val/problems``,
    ``val/greedy_length_mean``, ``val/truncated_frac``, ``val/grading_errors``, ``val/grading_timeouts``,
    ``val/new_tokens``, ``val/generate_compute_seconds``, ``val/tokens_per_s``, and the wall times
    ``val/generate_seconds``, ``val/grade_seconds``, ``val/seconds``, and ``val/weights_version`` (the weights
    the replicas evaluated: the step count after a sync). A failing role raises
    :class:`driver.launch.RoleFailedError` naming it.
    """
    if len(val_prompts) == 0:
        raise ValueError("run_validation: no validation prompts")
    start = time.perf_counter()
    shares = split_rows(len(val_prompts), len(roles.rollout))
    refs = [
        h.evaluate.remote(val_prompts[s], k, seed + s.start * k) for h, s in zip(roles.rollout, shares, strict=False)
    ]
    rows = fanout.gather_rows("rollout", refs, f"validation generation (step {step})")
    generated = time.perf_counter()
    chunks = grading_chunks(rows, grade_chunk)
    graded = call(
        ["reward-0"] * len(chunks), [roles.reward.score.remote(c) for c in chunks], f"validation grading (step {step})"
    )
    graded_at = time.perf_counter()
    metrics = validation_metrics(rows, graded, k)
    metrics["val/generate_seconds"] = generated - start
    metrics["val/grade_seconds"] = graded_at - generated
    metrics["val/seconds"] = graded_at - start
    if "weights_version" in rows.meta_info:  # the stalest replica's weights (gather_rows keeps the minimum)
        metrics["val/weights_version"] = float(rows.meta_info["weights_version"])
    return metrics
