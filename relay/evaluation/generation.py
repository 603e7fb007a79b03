"""Validation generations: per problem one greedy response and ``k`` samples, laid out as graded rows.

Row layout (prompt-major, like a training rollout): problem ``i`` owns rows ``i*(1+k) .. i*(1+k)+k``;
``sample_index`` 0 is the greedy response, 1..k the samples. With 2 problems and ``k=2`` the rows are
``[p0 greedy, p0 s1, p0 s2, p1 greedy, p1 s1, p1 s2]`` and ``acc.reshape(2, 3)`` puts the greedy column first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from relay.data_proto import DataProto
from relay.engines.base import Generation, SamplingSettings

# What the reward role reads to grade a row, and the row's task when the dataset mixes tasks.
GRADE_INPUTS = ["response_text", "ground_truth", "question", "uid"]
# The token fields a user reward function reads (relay.scoring.user_function), in training's layout: validation
# rows carry them too, so a function that reads token ids grades validation as it grades training.
GRADE_TOKEN_INPUTS = ["responses", "response_mask", "response_length"]
TASK_COLUMN = "data_source"
# Optional columns of validation prompts: a row's part of the split (a reasoning-gym dataset, a difficulty level),
# reported on its own, and the answer as text (the majority baseline counts it).
SUBSET_COLUMN = "subset"
ANSWER_COLUMN = "reference_answer"


def grade_inputs(rows: DataProto) -> list[str]:
    """The non-tensor fields of ``rows`` the reward role reads: :data:`GRADE_INPUTS`, and ``data_source`` when the
    rows carry it (a dataset that mixes tasks)."""
    return GRADE_INPUTS + ([TASK_COLUMN] if TASK_COLUMN in rows.non_tensor else [])


def greedy_settings(max_new_tokens: int) -> SamplingSettings:
    """One argmax response per prompt (temperature 0: no top-k/top-p, no seed)."""
    return SamplingSettings(n=1, max_new_tokens=max_new_tokens, temperature=0.0)


def generate_for_validation(
    engine: Any,
    prompts: Sequence[Sequence[int]],
    sampling: SamplingSettings,
    chunk_prompts: int,
    progress: Callable[[int], None] | None = None,
) -> list[list[Generation]]:
    """``result[i]`` is ``[greedy, sample_1, ..., sample_k]`` for ``prompts[i]``, ``k = sampling.n``.

    The engine sees ``chunk_prompts`` prompts per call (one greedy call, one sampled call). Chunk ``c``
    starting at prompt ``lo`` samples with seed ``sampling.seed + lo * k``, so vLLM's per-request seeds
    (``seed + index * n``) are the same for a prompt whatever the chunking. ``progress(done)`` is called
    after each chunk with the number of prompts it held. With ``k = 0`` only the greedy call runs.
    """
    if chunk_prompts < 1:
        raise ValueError(f"chunk_prompts must be >= 1, got {chunk_prompts}")
    greedy = greedy_settings(sampling.max_new_tokens)
    k = sampling.n
    out: list[list[Generation]] = []
    for lo in range(0, len(prompts), chunk_prompts):
        chunk = prompts[lo : lo + chunk_prompts]
        chunk_sampling = replace(sampling, seed=None if sampling.seed is None else sampling.seed + lo * k)
        greedy_out = engine.generate(chunk, greedy)
        sampled_out = engine.generate(chunk, chunk_sampling) if k else [[] for _ in chunk]
        out += [[g[0], *s] for g, s in zip(greedy_out, sampled_out, strict=True)]
        if progress is not None:
            progress(len(chunk))
    return out


def validation_rows(prompts: DataProto, generations: list[list[Generation]], tokenizer: Any) -> DataProto:
    """The rows to grade: ``len(prompts) * (1 + k)`` of them in the layout of this module's docstring.

    ``non_tensor``: ``uid``, ``question``, ``ground_truth`` and, when present, ``data_source``, ``subset`` and
    ``reference_answer`` (repeated per row), ``response_text``;
    ``batch``: ``sample_index`` int32 (0 greedy), ``response_length`` int32 (the model's tokens), ``finished`` bool
    (ended in EOS), ``responses`` [B, R] int32 (token ids, right-padded with the tokenizer's pad id) and
    ``response_mask`` [B, R] float32 (1 on the model's tokens) as in a training rollout, and for multi-turn responses
    ``tool_calls`` int32 (tool results in the response).
    """
    per_prompt = {len(g) for g in generations}
    if len(generations) != len(prompts) or len(per_prompt) > 1:
        raise ValueError(f"expected {len(prompts)} equal groups of generations, got sizes {sorted(per_prompt)}")
    width = per_prompt.pop() if per_prompt else 1
    flat = [g for group in generations for g in group]
    texts = tokenizer.batch_decode([g.token_ids for g in flat], skip_special_tokens=True) if flat else []
    columns = ("uid", "question", "ground_truth", TASK_COLUMN, SUBSET_COLUMN, ANSWER_COLUMN)
    kept = prompts.select(non_tensor_keys=[k for k in columns if k in prompts.non_tensor])
    rows = kept.repeat(width, interleave=True)
    batch = {
        "sample_index": np.tile(np.arange(width, dtype=np.int32), len(prompts)),
        "response_length": np.array([model_tokens(g) for g in flat], np.int32),
        "finished": np.array([g.finished for g in flat], bool),
        **response_tokens(flat, tokenizer.pad_token_id),
    }
    if any(g.loss_mask is not None for g in flat):  # multi-turn responses (relay.agent)
        batch["tool_calls"] = np.array([tool_results(g) for g in flat], np.int32)
    texts_column = np.array(texts, dtype=object)
    return DataProto.from_dict(batch=batch, non_tensor={**rows.non_tensor, "response_text": texts_column})


def response_tokens(flat: Sequence[Generation], pad_token_id: int | None) -> dict[str, np.ndarray]:
    """``responses`` [B, R] int32 right-padded with ``pad_token_id`` (0 when the tokenizer has none) and
    ``response_mask`` [B, R] float32 (1 on the model's tokens, 0 on tool results and padding), R the longest.

    Example: token ids ``[5, 6]`` and ``[7]``, pad 0 -> ``responses [[5, 6], [7, 0]]``, ``response_mask
    [[1, 1], [1, 0]]``."""
    width = max((len(g.token_ids) for g in flat), default=0)
    responses = np.full((len(flat), width), pad_token_id or 0, np.int32)
    mask = np.zeros((len(flat), width), np.float32)
    for i, g in enumerate(flat):
        responses[i, : len(g.token_ids)] = g.token_ids
        mask[i, : len(g.token_ids)] = 1.0 if g.loss_mask is None else g.loss_mask
    return {"responses": responses, "response_mask": mask}


def model_tokens(g: Generation) -> int:
    """The response's tokens the model wrote (a multi-turn response's tool results not counted)."""
    return len(g.token_ids) if g.loss_mask is None else int(sum(g.loss_mask))


def tool_results(g: Generation) -> int:
    """The tool results in a multi-turn response: its runs of loss-mask-0 tokens (0 for a single-turn one).

    Example: ``loss_mask = [1, 1, 0, 0, 1, 0, 1]`` -> 2."""
    if g.loss_mask is None:
        return 0
    mask = np.asarray(g.loss_mask)
    starts = (mask[1:] == 0) & (mask[:-1] != 0)
    return int(starts.sum()) + int(bool(len(mask)) and mask[0] == 0)


def split_correctness(acc: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``acc`` over the rows (``[P * (1 + k)]``, 1 = correct) as greedy ``[P]`` and samples ``[P, k]`` bools.

    Worked example: ``split_correctness([1, 0, 1, 0, 0, 0], k=2)`` -> greedy ``[True, False]``,
    samples ``[[False, True], [False, False]]``.
    """
    acc = np.asarray(acc)
    if acc.ndim != 1 or len(acc) % (1 + k):
        raise ValueError(f"expected [P * (1 + k)] = [P * {1 + k}] correctness values, got shape {acc.shape}")
    grid = acc.reshape(-1, 1 + k) > 0.5
    return grid[:, 0], grid[:, 1:]
