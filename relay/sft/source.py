"""A warm start's data: traces tokenized once, served as the learner's batches in shuffled, resumable epochs.

``sft.traces`` picks the conversion (:mod:`relay.sft.gsm8k_traces`: ``gsm8k_tools`` calculator calls, prompted with
the ``tools`` template that shows the call syntax; ``gsm8k_plain`` chains of thought, prompted with
``data.prompt_template``; :mod:`relay.sft.worked_sums`: ``worked_sums``, the run's own two-term sums worked column
by column, prompted as the GRPO run prompts them, and ``worked_sums_placed``, each term's digits placed in their
columns first). Each trace's prompt is rendered as the training run renders
prompts and its response laid out as a rollout's (:mod:`relay.sft.batches`); a response longer than
``data.max_response_length`` is cut there and counted. The batcher is the GRPO run's
(:class:`relay.data.gsm8k.PromptBatcher`), so a checkpoint stores the same cursor and a resumed warm start continues
on the same traces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relay.data.gsm8k import DatasetError, PromptBatcher, build_messages
from relay.data_proto import DataProto
from relay.engines.base import Generation
from relay.sft.batches import chat_prompt_ids, encode_with, sft_batch, trace_generation
from relay.sft.gsm8k_traces import Trace, convert_file
from relay.sft.worked_sums import WORKINGS, sum_traces
from relay.tasks.run_tasks import RunTasks

TEMPLATES = {"gsm8k_tools": "tools", "gsm8k_plain": None}  # None: data.prompt_template


def gsm8k_traces(cfg: Any, tokenizer: Any, split: str) -> tuple[list[Trace], dict[str, int], list[list[int]]]:
    """GSM8K's solutions converted (``sft.train_path``/``sft.val_path``), the skips by reason, and each trace's
    prompt ids under its template."""
    s = cfg.sft
    form = "tools" if s.traces == "gsm8k_tools" else "plain"
    path, limit = (s.train_path, s.train_size) if split == "train" else (s.val_path, s.val_size)
    traces, skipped = convert_file(path, form=form, limit=limit)
    template = TEMPLATES[s.traces] or cfg.data.prompt_template
    return traces, skipped, [chat_prompt_ids(tokenizer, build_messages(t.question, template)) for t in traces]


def worked_sum_traces(cfg: Any, tokenizer: Any, split: str) -> tuple[list[Trace], dict[str, int], list[list[int]]]:
    """The run's own rows (``data.*``: ``train``, or ``val`` from its test split) as worked sums
    (:mod:`relay.sft.worked_sums`), the skips by reason, and each trace's prompt ids as the GRPO run renders them."""
    tasks = RunTasks.from_config(cfg.data)
    path = cfg.data.train_path if split == "train" else cfg.data.test_path
    examples = tasks.read(path, "train" if split == "train" else "test", quiet=True)
    limit = cfg.sft.train_size if split == "train" else cfg.sft.val_size
    traces, skipped = sum_traces(examples, limit, cfg.sft.traces)
    if not traces:
        raise DatasetError(
            f"sft.traces={cfg.sft.traces}: none of the {len(examples)} {split} rows of data.task={cfg.data.task} is a "
            f"two-term sum of whole numbers (skipped: {skipped}); pick a task of sums or another sft.traces"
        )
    by_uid = {ex.uid: ex for ex in examples}
    rendered = [tasks.render(by_uid[t.uid], tokenizer) for t in traces]
    return traces, skipped, [list(ids) for ids in tokenizer(rendered, add_special_tokens=False)["input_ids"]]


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
        data = cfg.data
        convert = worked_sum_traces if cfg.sft.traces in WORKINGS else gsm8k_traces
        traces, skipped, prompts = convert(cfg, tokenizer, split)
        encode = encode_with(tokenizer)
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
