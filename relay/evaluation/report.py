"""From generated and graded validation rows to the ``val/*`` metrics (shared by the trainer and the evaluator)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from relay.agent.tool_call import calls_in
from relay.data_proto import DataProto
from relay.evaluation.generation import (
    ANSWER_COLUMN,
    GRADE_TOKEN_INPUTS,
    SUBSET_COLUMN,
    TASK_COLUMN,
    grade_inputs,
    split_correctness,
)
from relay.evaluation.metrics import majority_baseline, summarize_validation, wilson_interval
from relay.metrics import outcomes as om
from relay.metrics import system as sm
from relay.metrics import validation as vm
from relay.scoring.answer import extract_answer

# Rows per reward call. The reward role's timeout (reward.timeout_s) bounds one call, and a formatted answer
# takes ~1.5 ms to verify, so 256 rows stay far inside it even on one grader process.
GRADE_CHUNK_ROWS = 256


# The reward role's meta_info flag that asks for the lenient reading too (training's grading does without it).
LENIENT = "lenient"


def grading_chunks(rows: DataProto, size: int = GRADE_CHUNK_ROWS) -> list[DataProto]:
    """The fields the reward role reads (a user function's token fields too, where the rows have them), in
    consecutive parts of at most ``size`` rows, each asking for the lenient reading (:data:`LENIENT`; no other
    meta_info)."""
    tokens = [key for key in GRADE_TOKEN_INPUTS if key in rows.batch]
    chunks = rows.select(batch_keys=tokens, non_tensor_keys=grade_inputs(rows), meta_keys=[]).split(size)
    for chunk in chunks:
        chunk.meta_info[LENIENT] = True
    return chunks


def row_grades(rows: DataProto, graded: Sequence[DataProto], key: str = "acc") -> np.ndarray:
    """The reward role's ``key`` (``acc``, strict, or ``acc_lenient``) of every row of ``rows``, in order, from its
    answers for :func:`grading_chunks`. Answers without ``acc_lenient`` (a role that grades strictly only) give
    their ``acc`` for it."""
    parts = [part.batch[key] if key in part.batch else part.batch["acc"] for part in graded]
    acc = np.concatenate([np.asarray(part) for part in parts]) if graded else np.zeros(0)
    if len(acc) != len(rows):
        raise ValueError(f"{len(rows)} validation rows but {len(acc)} grades")
    return acc


def validation_metrics(rows: DataProto, graded: Sequence[DataProto], k: int) -> dict[str, float]:
    """``val/*`` metrics from the rows of :func:`relay.evaluation.generation.validation_rows` and the reward
    role's answers for :func:`grading_chunks` of them (in order).

    Skill and format apart (:func:`accuracy_metrics`): strict accuracy (the answer where the prompt asked for it)
    and lenient accuracy (also the last number, :func:`relay.scoring.graders.lenient_acc`), each greedy with its
    95% Wilson interval and as pass@k / mean@k; ``val/format_rate_greedy`` and ``val/format_rate@k`` (the share of
    greedy / sampled responses with a final answer the grader can find: ``#### X``, ``\\boxed{X}`` or "the
    answer is X", right or wrong); ``val/majority_baseline`` when the rows carry their answers (the accuracy of
    always answering the split's most common answer). Also ``val/greedy_length_mean`` (tokens),
    ``val/truncated_frac`` (rows cut at the length limit), ``val/grading_errors`` and ``val/grading_timeouts``
    (rows scored 0 because grading failed; a timeout means ``reward.timeout_s`` is too short for a chunk), and
    from the generation metrics ``val/new_tokens``, ``val/generate_compute_seconds``, ``val/tokens_per_s``.
    Multi-turn rows add :func:`tool_metrics`; rows of several tasks or subsets add each one's figures
    (:func:`per_source_metrics`).
    """
    is_greedy = rows.batch["sample_index"] == 0
    strict, lenient = row_grades(rows, graded), row_grades(rows, graded, "acc_lenient")
    out = accuracy_metrics(strict, lenient, k)
    formatted = np.array([extract_answer(str(text)) is not None for text in rows.non_tensor["response_text"]])
    out[vm.VAL_FORMAT_RATE] = float(formatted[is_greedy].mean())
    if k:
        out[vm.VAL_FORMAT_RATE_AT_K.format(k=k)] = float(formatted[~is_greedy].mean())
    if ANSWER_COLUMN in rows.non_tensor:
        out[vm.VAL_MAJORITY_BASELINE] = majority_baseline(list(rows.non_tensor[ANSWER_COLUMN][is_greedy]))
    out[vm.VAL_GREEDY_LENGTH] = float(rows.batch["response_length"][is_greedy].mean())
    out[vm.VAL_TRUNCATED] = float(1.0 - rows.batch["finished"].mean())
    out[vm.VAL_TRUNCATED_GREEDY] = float(1.0 - rows.batch["finished"][is_greedy].mean())
    if "tool_calls" in rows.batch:
        out |= tool_metrics(rows, split_correctness(strict, k)[0])
    for column in (TASK_COLUMN, SUBSET_COLUMN):  # a dataset that mixes tasks, a split of several parts
        if column in rows.non_tensor:
            out |= per_source_metrics(np.asarray(rows.non_tensor[column])[is_greedy], strict, lenient, k)
    grading = [part.meta_info.get("metrics", {}) for part in graded]
    out[vm.VAL_GRADING_ERRORS] = float(sum(m.get(om.REWARD_ERRORS, 0.0) for m in grading))
    out[vm.VAL_GRADING_TIMEOUTS] = float(sum(m.get(om.REWARD_TIMEOUTS, 0.0) for m in grading))
    generation = rows.meta_info.get("metrics", {})
    for source, key in (
        (vm.VALIDATION_NEW_TOKENS, vm.VAL_NEW_TOKENS),
        (sm.TIMING_VALIDATION_GENERATE_COMPUTE, vm.VAL_GENERATE_COMPUTE),
        (sm.THROUGHPUT_VALIDATION, vm.VAL_TOKENS_PER_S),
    ):
        if source in generation:
            out[key] = float(generation[source])
    return out


def accuracy_metrics(strict: np.ndarray, lenient: np.ndarray, k: int) -> dict[str, float]:
    """Strict and lenient correctness of the rows (``[P * (1 + k)]`` each, greedy first per problem) as
    :func:`relay.evaluation.metrics.summarize_validation`'s metrics, the lenient ones prefixed ``lenient_``, and
    each greedy accuracy's 95% Wilson interval (``..._ci_low`` / ``..._ci_high``).

    Worked example (k=1): strict ``[1, 0, 0, 0]``, lenient ``[1, 1, 1, 0]`` -> ``val/accuracy_greedy = 0.5``,
    ``val/lenient_accuracy_greedy = 1.0``, ``val/mean@1 = 0.0``, ``val/lenient_mean@1 = 0.5``, ``val/problems = 2``.
    """
    out: dict[str, float] = {}
    for acc, is_lenient in ((strict, False), (lenient, True)):
        greedy, samples = split_correctness(acc, k)
        summary = summarize_validation(greedy, samples)
        low, high = wilson_interval(int(greedy.sum()), len(greedy))
        summary |= {vm.VAL_ACCURACY_CI_LOW: low, vm.VAL_ACCURACY_CI_HIGH: high}
        if is_lenient:
            summary.pop(vm.VAL_PROBLEMS)
            summary = {vm.lenient_key(key): value for key, value in summary.items()}
        out |= summary
    return out


def tool_metrics(rows: DataProto, greedy_correct: np.ndarray) -> dict[str, float]:
    """Multi-turn rows: ``val/tool_call_rate_greedy`` (greedy responses that called a tool),
    ``val/correct_with_tool_share_greedy`` (of the correct greedy ones, those that did),
    ``val/tool_calls_per_response_greedy``, and when some greedy response wrote a call
    ``val/tool_call_parse_rate_greedy`` (:func:`tool_call_parse_rate`)."""
    is_greedy = rows.batch["sample_index"] == 0
    calls = rows.batch["tool_calls"][is_greedy]
    called = calls > 0
    out = {
        vm.VAL_TOOL_CALL_RATE: float(called.mean()),
        vm.VAL_CORRECT_WITH_TOOL: float(called[greedy_correct].mean()) if greedy_correct.any() else 0.0,
        vm.VAL_TOOL_CALLS_PER_RESPONSE: float(calls.mean()),
    }
    parse_rate = tool_call_parse_rate(rows.non_tensor["response_text"][is_greedy])
    if parse_rate is not None:
        out[vm.VAL_TOOL_CALL_PARSE_RATE] = parse_rate
    return out


def per_source_metrics(sources: np.ndarray, strict: np.ndarray, lenient: np.ndarray, k: int) -> dict[str, float]:
    """:func:`accuracy_metrics` of each source's problems, keyed ``val/<source>/...`` without the intervals;
    ``sources`` is ``[P]`` (the task or subset of each problem), ``strict`` / ``lenient`` the rows' correctness.

    Worked example (k=0): sources ``["gsm8k", "math", "math"]``, strict ``[1, 0, 1]``, lenient ``[1, 1, 1]`` give
    ``val/gsm8k/accuracy_greedy = 1.0``, ``val/gsm8k/lenient_accuracy_greedy = 1.0``, ``val/gsm8k/problems = 1.0``,
    ``val/math/accuracy_greedy = 0.5``, ``val/math/lenient_accuracy_greedy = 1.0`` and ``val/math/problems = 2.0``.
    """
    out: dict[str, float] = {}
    names = np.array([str(s) for s in sources])
    rows_of = np.repeat(names, 1 + k)
    for source in sorted(set(names)):
        mine = rows_of == source
        summary = accuracy_metrics(np.asarray(strict)[mine], np.asarray(lenient)[mine], k)
        out |= {vm.subset_key(key, source): value for key, value in summary.items() if "_ci_" not in key}
    return out


def tool_call_parse_rate(texts: Sequence[str]) -> float | None:
    """The share of the ``<tool_call>`` spans in ``texts`` that parse as a call (``name: argument`` or the JSON
    form; :func:`relay.agent.tool_call.calls_in`); None when no text has a call.

    Example: one response with a parsed call and a bare ``<tool_call>2*3</tool_call>``, one without calls -> 0.5.
    """
    calls = [call for text in texts for call in calls_in(str(text))]
    return sum(not call.error for call in calls) / len(calls) if calls else None


def response_records(rows: DataProto, graded: Sequence[DataProto]) -> list[dict]:
    """One JSON-ready record per validation row, in row order: what the model wrote and how it was graded.

    Keys: ``uid``, ``sample`` (0 is the greedy response), ``question``, ``ground_truth``, ``response`` (the
    response text, tool results included for multi-turn rows), ``correct`` (the strict grade: the answer where the
    prompt asked for it), ``correct_lenient`` (the last number, whatever the format), ``finished`` (ended before the
    length or turn limit), ``response_tokens`` (the model's), and ``tool_calls`` for multi-turn rows. Example: 2
    problems with ``k=1`` give 4 records, samples 0, 1, 0, 1.
    """
    acc, lenient = row_grades(rows, graded), row_grades(rows, graded, "acc_lenient")
    nt, batch = rows.non_tensor, rows.batch
    records = []
    for i in range(len(rows)):
        record = {
            "uid": str(nt["uid"][i]),
            "sample": int(batch["sample_index"][i]),
            "question": str(nt["question"][i]),
            "ground_truth": str(nt["ground_truth"][i]),
            "response": str(nt["response_text"][i]),
            "correct": bool(acc[i] > 0),
            "correct_lenient": bool(lenient[i] > 0),
            "finished": bool(batch["finished"][i]),
            "response_tokens": int(batch["response_length"][i]),
        }
        if "tool_calls" in batch:
            record["tool_calls"] = int(batch["tool_calls"][i])
        records.append(record)
    return records
