"""The transformers rollout engine: ``generate`` with a KV cache, n samples per prompt in one call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch
from transformers import (
    AutoModelForCausalLM,
    LogitsProcessor,
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from relay.engines.base import Generation, SamplingSettings
from relay.engines.torch_logprobs import load_named_tensors


class _SampledTokenLogProbs(LogitsProcessor):
    """Records the log-prob of each sampled token under the distribution it was sampled from.

    It runs last in the processor list, after the temperature / top-k / top-p warpers, so it sees
    the processed scores (``-inf`` on truncated tokens) — the same convention as vLLM's
    ``processed_logprobs``; with top-k and top-p off that is ``log softmax(logits / T)``.

    A logits processor sees step ``t``'s logits before the token is sampled, so it keeps the
    step's log-softmax and reads off the sampled token at step ``t + 1`` (from ``input_ids``);
    ``finish`` reads the last step's. Memory stays ``[batch, vocab]`` instead of one such tensor
    per generated token.
    """

    def __init__(self) -> None:
        self.previous: torch.Tensor | None = None
        self.steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.previous is not None:
            self.steps.append(self.previous.gather(1, input_ids[:, -1:]).squeeze(1))
        self.previous = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, last_tokens: torch.Tensor) -> torch.Tensor:
        if self.previous is not None:
            self.steps.append(self.previous.gather(1, last_tokens[:, None]).squeeze(1))
        return torch.stack(self.steps, dim=1)


class _AllowedTokens(LogitsProcessor):
    """Every token but ``allowed`` gets ``-inf``: first in the list, as vLLM masks ``allowed_token_ids`` before its
    temperature and its processed log-probs."""

    def __init__(self, allowed: Sequence[int]) -> None:
        self.allowed = torch.tensor(list(allowed), dtype=torch.long)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        masked = torch.full_like(scores, float("-inf"))
        index = self.allowed.to(scores.device)
        return masked.index_copy(1, index, scores.index_select(1, index))


class HFRolloutEngine:
    """Rollout with ``transformers`` on CPU or GPU; the fallback engine behind vLLM."""

    def __init__(
        self,
        model_path: str,
        eos_token_ids: Sequence[int],
        pad_token_id: int,
        device: str = "cpu",
        dtype: str = "float32",
    ):
        """``dtype``: the weights' and the forward's (``rollout.dtype``; the log-probs are computed in float32 from
        its logits either way)."""
        self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=getattr(torch, dtype)).to(device).eval()
        self.device = device
        self.eos_token_ids = list(eos_token_ids)
        self.pad_token_id = pad_token_id
        self.model_path = model_path
        self._tokenizer = None  # loaded on the first call with stop strings (transformers matches them on text)

    def load_weights(self, named_tensors: dict[str, np.ndarray]) -> int:
        return load_named_tensors(self.model, named_tensors)

    @torch.no_grad()
    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingSettings) -> list[list[Generation]]:
        """``result[i][j]`` is the ``j``-th of ``sampling.n`` samples for ``prompts[i]``.

        ``temperature == 0`` is greedy decoding (argmax at every step, no warpers, no randomness): the
        ``n`` results of a prompt are the same response, and each token's log-prob is ``log softmax(logits)``
        (vLLM's convention for greedy requests)."""
        if sampling.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0: greedy), got {sampling.temperature}")
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
        ids, mask = _left_padded(prompts, self.pad_token_id)
        width = ids.shape[1]
        recorder = _SampledTokenLogProbs()
        greedy = sampling.temperature == 0
        processors, decoding = _decoding_options(sampling)
        if sampling.stop:  # a sequence stops at a stop string; later positions hold padding
            decoding |= {"stop_strings": list(sampling.stop), "tokenizer": self._stop_string_tokenizer()}
        out = self.model.generate(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            **decoding,
            max_new_tokens=sampling.max_new_tokens,
            eos_token_id=self.eos_token_ids,
            pad_token_id=self.pad_token_id,
            logits_processor=LogitsProcessorList([*processors, recorder]),
            return_dict_in_generate=True,
        )
        new_tokens = out.sequences[:, width:].cpu()
        log_probs = recorder.finish(new_tokens[:, -1].to(recorder.previous.device)).cpu()
        if greedy:  # one decode per prompt; its n results are copies
            once = self._split(new_tokens.numpy(), log_probs.numpy(), len(prompts), 1)
            return [
                [replace(g, token_ids=list(g.token_ids), log_probs=list(g.log_probs)) for _ in range(sampling.n)]
                for (g,) in once
            ]
        return self._split(new_tokens.numpy(), log_probs.numpy(), len(prompts), sampling.n)

    def _stop_string_tokenizer(self) -> Any:
        """The model's tokenizer, loaded on first use: transformers matches stop strings on decoded text."""
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        return self._tokenizer

    def _split(self, tokens: np.ndarray, log_probs: np.ndarray, num_prompts: int, n: int) -> list[list[Generation]]:
        eos = set(self.eos_token_ids)
        results: list[list[Generation]] = []
        for i in range(num_prompts):
            group = []
            for j in range(n):
                row, lp = tokens[i * n + j], log_probs[i * n + j]
                end = next((k + 1 for k, t in enumerate(row) if int(t) in eos), None)
                length = end if end is not None else len(row)
                group.append(Generation(row[:length].tolist(), lp[:length].tolist(), finished=end is not None))
            results.append(group)
        return results


def _left_padded(prompts: Sequence[Sequence[int]], pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``prompts`` as ``[len(prompts), longest]`` token ids and attention mask, left-padded so that every prompt
    ends at the same column."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
        mask[i, width - len(p) :] = 1
    return ids, mask


def _decoding_options(sampling: SamplingSettings) -> tuple[list[LogitsProcessor], dict[str, Any]]:
    """The logits warpers and ``generate`` options for ``sampling``: greedy (``temperature == 0``, one decode per
    prompt, no warpers) or sampling ``n`` sequences a prompt through our own warpers, in vLLM's order."""
    allowed = [_AllowedTokens(sampling.allowed_token_ids)] if sampling.allowed_token_ids else []
    if sampling.temperature == 0:  # argmax needs no warpers (a temperature-0 warper would divide by zero)
        return allowed, {"do_sample": False, "num_return_sequences": 1}
    # generate's own warpers are switched off (transformers would otherwise add its default top_k=50).
    processors: list[LogitsProcessor] = [*allowed, TemperatureLogitsWarper(sampling.temperature)]
    if sampling.top_k > 0:
        processors.append(TopKLogitsWarper(sampling.top_k))
    if sampling.top_p < 1.0:
        processors.append(TopPLogitsWarper(sampling.top_p))
    decoding = {"do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": 0, "num_return_sequences": sampling.n}
    return processors, decoding
