"""A warm start's data: traces tokenized once, served as the learner's batches in shuffled, resumable epochs.

``sft.traces`` picks the conversion (:mod:`relay.sft.gsm8k_traces`: ``gsm8k_tools`` calculator calls, prompted with
the ``tools`` template that shows the call syntax; ``gsm8k_plain`` chains of thought, prompted with
``data.prompt_template``). Each trace's prompt is rendered as the training run renders prompts and its response
laid out as a rollout's (:mod:`relay.sft.batches`); a response longer than ``data.max_response_length`` is cut there
and counted. The batcher is the GRPO run's (:class:`relay.data.gsm8k.PromptBatcher`), so a checkpoint stores the
same cursor and a resumed warm start continues on the same traces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relay.data.gsm8k import PromptBatcher, build_messages
from relay.data_proto import DataProto
from relay.engines.base import Generation
from relay.sft.batches import chat_prompt_ids, encode_with, sft_batch, trace_generation
from relay.sft.gsm8k_traces import convert_file

TEMPLATES = {"gsm8k_tools": "tools", "gsm8k_plain": None}  # None: data.prompt_template


@dataclass
class SftSource:
    """Tokenized traces (``prompts[i]``, ``responses[i]``) and the batcher over their indices."""

    uids: list[str]
    prompts: list[list[int]]
    responses: list[Generation]
    batcher: PromptBatcher
    skipped: dict[str, int]  # solutions the conversion could not use, by reason
    cut: int  # responses longer than data.max_response_length (their tails are not trained)
    pad_token_id: int
    bucket: int
    max_response_length: int

    @classmethod
    def from_config(cls, cfg: Any, tokenizer: Any, batch_size: int, split: str = "train") -> SftSource:
        """The ``split`` traces (``train``: ``sft.train_path`` up to ``sft.train_size``; ``val``: the first
        ``sft.val_size`` of ``sft.val_path``), in batches of ``batch_size``."""
        s, data = cfg.sft, cfg.data
        form = "tools" if s.traces == "gsm8k_tools" else "plain"
        path, limit = (s.train_path, s.train_size) if split == "train" else (s.val_path, s.val_size)
        traces, skipped = convert_file(path, form=form, limit=limit)
        template = TEMPLATES[s.traces] or data.prompt_template
        encode = encode_with(tokenizer)
        prompts = [chat_prompt_ids(tokenizer, build_messages(t.question, template)) for t in traces]
        responses = [trace_generation(t, encode, tokenizer.eos_token_id) for t in traces]
        cut = sum(len(g.token_ids) > data.max_response_length for g in responses)
        batcher = PromptBatcher(list(range(len(traces))), batch_size, data.shuffle_seed)  # type: ignore[arg-type]
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        return cls(
            [t.uid for t in traces],
            prompts,
            responses,
            batcher,
            dict(skipped),
            cut,
            pad,
            int(cfg.train.length_bucket),
            int(data.max_response_length),
        )

    def summary(self) -> dict[str, Any]:
        """The ``data`` event's figures: traces, solutions skipped by reason, responses cut at the length limit."""
        return {"traces": len(self.uids), "skipped": self.skipped, "cut_at_max_response_length": self.cut}

    @property
    def epochs_done(self) -> int:
        """Complete passes over the traces so far."""
        state = self.batcher.state_dict()
        return state["epoch"] + (state["position"] == len(self.uids))

    def next_batch(self) -> DataProto:
        """The next step's traces as the learner's padded batch (``meta_info["prompt_length"]``, as a rollout's)."""
        return self.batch_of(list(self.batcher.next_batch()))

    def batch_of(self, indices: list[int]) -> DataProto:
        """The traces at ``indices`` as one padded batch."""
        arrays = sft_batch(
            [self.prompts[i] for i in indices],
            [self.responses[i] for i in indices],
            self.pad_token_id,
            self.bucket,
            self.max_response_length,
        )
        return DataProto.from_dict(batch=arrays, meta_info={"prompt_length": arrays["prompts"].shape[1]})
