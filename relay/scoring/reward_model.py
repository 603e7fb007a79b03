"""A sequence-classification reward model's score of each (question, response): the model's own chat template over
the conversation, right-padded batches, the score head read at each row's last real token.

The conversation is ``[{"role": "user", "content": question}, {"role": "assistant", "content": response}]``
rendered by the reward model's tokenizer (``add_generation_prompt=False``): the model judges the answer to the task's
question, whatever system prompt or instructions the policy was sampled under. A conversation longer than
``max_length`` tokens loses its start (the score is read at the end, so the response's end is kept) and is counted.

Where the score is read, and why not through ``model(...).logits``: transformers' ``*ForSequenceClassification``
pools the rightmost token that is not ``pad_token_id`` (transformers 5.19, ``GenericForSequenceClassification``),
so a conversation that ends in a token equal to the pad id (SmolLM2 pads with ``<|im_end|>``, the turn's end) is read
one token early. Here the row's last attended position is read, from the attention mask, as verl's reward-model
worker does (``volcengine/verl``, ``verl/workers/fsdp_workers.py``: ``RewardModelWorker._forward_micro_batch``
reads ``argmax(position_ids * attention_mask)`` of right-padded rows built by ``_switch_chat_template``).

Worked example: rows of 3 and 5 tokens padded to 5 -> masks ``[1,1,1,0,0]`` and ``[1,1,1,1,1]``, read at positions
2 and 4 of the head's ``[B, T, 1]`` output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ClassifierBatch:
    """Right-padded token ids and their mask, and how many conversations lost their start to ``max_length``."""

    input_ids: np.ndarray  # [B, T] int64
    attention_mask: np.ndarray  # [B, T] int64, 1 on real tokens
    truncated: int


def conversation(question: str, response: str) -> list[dict[str, str]]:
    """The conversation a reward model scores."""
    return [{"role": "user", "content": question}, {"role": "assistant", "content": response}]


def classifier_batch(
    tokenizer: Any, questions: Sequence[str], responses: Sequence[str], max_length: int
) -> ClassifierBatch:
    """Each (question, response) through ``tokenizer``'s chat template, kept to its last ``max_length`` tokens,
    right-padded with ``tokenizer.pad_token_id`` (its eos when it has none)."""
    rows, truncated = [], 0
    for question, response in zip(questions, responses, strict=True):
        text = tokenizer.apply_chat_template(conversation(question, response), tokenize=False)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) > max_length:
            ids, truncated = ids[-max_length:], truncated + 1
        rows.append(ids)
    width = max((len(r) for r in rows), default=1)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    input_ids = np.full((len(rows), width), pad, np.int64)
    mask = np.zeros((len(rows), width), np.int64)
    for i, ids in enumerate(rows):
        input_ids[i, : len(ids)] = ids
        mask[i, : len(ids)] = 1
    return ClassifierBatch(input_ids, mask, truncated)


def last_token_positions(attention_mask: np.ndarray) -> np.ndarray:
    """Each right-padded row's last real position.

    >>> last_token_positions(np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])).tolist()
    [2, 4]
    """
    if not attention_mask.any(axis=1).all():
        raise ValueError("a reward-model row has no token")
    return attention_mask.sum(axis=1) - 1


def classifier_scores(model: Any, batch: ClassifierBatch, micro_batch_size: int) -> np.ndarray:
    """The head's score at each row's last real token, ``micro_batch_size`` rows per forward; float32 [B].
    ``model`` is a transformers ``*ForSequenceClassification`` with one label: its decoder (``base_model_prefix``)
    gives the hidden states, its ``score`` head the scores."""
    import torch

    decoder, head = getattr(model, model.base_model_prefix), model.score
    positions = last_token_positions(batch.attention_mask)
    out = []
    with torch.no_grad():
        for lo in range(0, len(positions), micro_batch_size):
            rows = slice(lo, lo + micro_batch_size)
            width = int(positions[rows].max()) + 1  # this forward's longest row
            ids = torch.from_numpy(batch.input_ids[rows, :width])
            mask = torch.from_numpy(batch.attention_mask[rows, :width])
            hidden = decoder(input_ids=ids, attention_mask=mask).last_hidden_state
            last = hidden[torch.arange(len(ids)), torch.from_numpy(positions[rows])]
            out.append(head(last)[:, 0].float().numpy())
    return np.concatenate(out) if out else np.zeros(0, np.float32)


def classifier_problem(config: dict[str, Any], key: str) -> str | None:
    """Why a checkpoint's ``config.json`` (as a dict) is not a one-label sequence classifier, naming ``key``; None
    when it is."""
    architectures = list(config.get("architectures") or [])
    if not any(str(a).endswith("ForSequenceClassification") for a in architectures):
        return (
            f"{key}: the checkpoint's architectures are {architectures or 'not given'}, not a "
            "*ForSequenceClassification model; reward_model.kind=classifier scores with a sequence-classification "
            "checkpoint (e.g. one saved by AutoModelForSequenceClassification with num_labels=1)"
        )
    labels = len(config.get("id2label") or {}) or int(config.get("num_labels", 2))
    if labels != 1:
        return f"{key}: the classifier has {labels} labels; a reward model has one (num_labels=1), a score per row"
    return None
