"""Validation during training (driver side): the rollout replicas generate, the reward role grades.

``run_validation`` sends each rollout replica a consecutive share of the validation prompts
(``RolloutWorker.evaluate``: one greedy response and ``k`` samples per problem), stacks the rows back in
order, grades them with the reward actor in chunks of ``GRADE_CHUNK_ROWS`` rows (one chunk is one
``reward.timeout_s`` budget), and turns the grades into the ``val/*`` metrics of :mod:`relay.evaluation`.
"""

from __future__ import annotations

import json
from pathlib import Path

from driver.role_group import Roles
from driver.timing import PhaseTimer
from relay.data_proto import DataProto
from relay.evaluation import GRADE_CHUNK_ROWS, grading_chunks, response_records, validation_metrics
from relay.metrics import validation as vm

# Each validation's responses and grades, one JSONL per validated step: outputs/<run>/validation/step_NNNNNN.jsonl.
VALIDATION_DIR = "validation"


def run_validation(
    roles: Roles,
    val_prompts: DataProto,
    k: int,
    step: int,
    *,
    seed: int = 0,
    grade_chunk: int = GRADE_CHUNK_ROWS,
    responses: Path | None = None,
) -> dict[str, float]:
    """The ``val/*`` metrics of the current policy on ``val_prompts`` (see
    :func:`relay.tasks.prompt_source.validation_prompts`), with ``k`` samples per problem.

    ``step`` only names the phase in errors. The samples' seed is ``seed`` at every validation (the same
    random streams each time, so changes between validations come from the weights); with vLLM a problem
    draws the same seeds whatever the number of replicas (replica shares are offset by ``start * k``).

    Returns ``val/accuracy_greedy``, ``val/pass@<k>``, ``val/mean@<k>``, ``val/problems``,
    ``val/greedy_length_mean``, ``val/truncated_frac``, ``val/grading_errors``, ``val/grading_timeouts``,
    ``val/new_tokens``, ``val/generate_compute_seconds``, ``val/tokens_per_s``, and the wall times
    ``val/generate_seconds``, ``val/grade_seconds``, ``val/seconds``, and ``val/weights_version`` (the weights
    the replicas evaluated: the step count after a sync). A failing role raises
    :class:`roles.role_call.RoleFailedError` naming it. ``responses``: a JSONL file that receives every response
    with its grade (:func:`relay.evaluation.response_records`), for paired comparisons of two runs problem by
    problem.
    """
    if len(val_prompts) == 0:
        raise ValueError("run_validation: no validation prompts")
    timer, rollout, reward = PhaseTimer(step), roles.rollout, roles.reward
    with timer.phase(vm.VAL_SECONDS):
        with timer.phase(vm.VAL_GENERATE_SECONDS, role="rollout", span="validation"):
            # each replica's samples seeded after its first problem: the same seeds whatever the replica count
            pending = rollout.submit("evaluate", val_prompts, k, step=step, share_args=lambda s: (seed + s.start * k,))
            rows = rollout.rows(pending, f"validation generation (step {step})")
        with timer.phase(vm.VAL_GRADE_SECONDS, role="reward", span="validation grading"):
            sent = [reward.submit_to_first("score", chunk) for chunk in grading_chunks(rows, grade_chunk)]
            graded = [reward.answers(p, f"validation grading (step {step})")[0] for p in sent]
    if responses is not None:
        write_responses(responses, response_records(rows, graded))
    metrics = {**validation_metrics(rows, graded, k), **timer.metrics()}
    if "weights_version" in rows.meta_info:  # the stalest replica's weights (the group keeps the minimum)
        metrics[vm.VAL_WEIGHTS_VERSION] = float(rows.meta_info["weights_version"])
    return metrics


def write_responses(path: Path, records: list[dict]) -> None:
    """``records`` as JSON lines in ``path`` (its directory made), written whole: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text("".join(json.dumps(r) + "\n" for r in records))
    partial.replace(path)
