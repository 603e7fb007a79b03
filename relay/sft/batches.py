"""Supervised traces as the learner's batches: the same padded layout a multi-turn rollout produces.

A trace (:class:`relay.sft.gsm8k_traces.Trace`) is a prompt and response segments ``(text, trained)``. Each
segment is tokenized on its own, as a tool rollout sees it (the model's turns are generated token by token and a
tool result is encoded and appended on its own, :func:`relay.agent.loop.append_result`), so the warm start
teaches exactly the token boundaries the RL run will meet; the response ends with EOS (trained: the model learns
to stop). The tokens become a :class:`relay.engines.base.Generation` with its ``loss_mask`` (1 on trained tokens,
0 on tool results) and go through :func:`relay.rollout_batch.assemble_rollout`, the rollout's own layout, plus
``advantages`` (the learner's batch needs the field; the supervised objective does not read it).

Worked example: segments ``[("So 48/2 = <tool_call>calculator: 48/2</tool_call>", True), ("<tool_result>24
</tool_result>", False), (" clips.\\n#### 24", True)]`` with token counts 13, 6 and 7 give 27 response tokens
(EOS added) with loss mask ``[1]*13 + [0]*6 + [1]*8``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from relay.engines.base import Generation
from relay.rollout_batch import assemble_rollout
from relay.sft.gsm8k_traces import Trace


def trace_generation(trace: Trace, encode: Callable[[str], list[int]], eos_token_id: int) -> Generation:
    """The trace's response as tokens with its loss mask (EOS appended, trained)."""
    token_ids: list[int] = []
    loss_mask: list[int] = []
    for text, trained in trace.segments:
        ids = encode(text)
        token_ids += ids
        loss_mask += [int(trained)] * len(ids)
    token_ids.append(eos_token_id)
    loss_mask.append(1)
    return Generation(token_ids=token_ids, log_probs=[0.0] * len(token_ids), finished=True, loss_mask=loss_mask)


def sft_batch(
    prompts: Sequence[Sequence[int]],
    generations: Sequence[Generation],
    pad_token_id: int,
    bucket: int,
    max_response_length: int | None = None,
) -> dict[str, np.ndarray]:
    """The learner's padded batch of ``prompts[i]`` + ``generations[i]``: :func:`assemble_rollout`'s arrays and
    ``advantages`` (the response mask). A response longer than ``max_response_length`` is cut there (counted by
    the caller: the tail is not trained)."""
    if max_response_length is not None:
        generations = [_cut(g, max_response_length) for g in generations]
    arrays = assemble_rollout(prompts, [[g] for g in generations], pad_token_id, bucket)
    arrays["advantages"] = arrays["response_mask"].copy()
    return arrays


def _cut(g: Generation, length: int) -> Generation:
    if len(g.token_ids) <= length:
        return g
    mask = None if g.loss_mask is None else g.loss_mask[:length]
    return Generation(g.token_ids[:length], g.log_probs[:length], finished=False, loss_mask=mask)


def encode_with(tokenizer: Any) -> Callable[[str], list[int]]:
    """A segment encoder: the tokenizer's ids of ``text`` without special tokens (what a rollout appends)."""
    return lambda text: list(tokenizer.encode(text, add_special_tokens=False))


def chat_prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """The prompt's token ids as the training run builds them (:class:`relay.tasks.prompt_source.PromptSource`): the
    chat template rendered with the generation prompt, then tokenized without special tokens."""
    rendered = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return list(tokenizer(rendered, add_special_tokens=False)["input_ids"])
