"""Tokenised prompts for each training step, as a DataProto the rollout role reads."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from relay.data.gsm8k import DatasetError, Example, PromptBatcher, build_messages, load_gsm8k
from relay.data_proto import DataProto


def fit_prompt(tokens: list[int], max_len: int, filter_overlong: bool, truncation: str) -> list[int] | None:
    """Apply the over-long-prompt policy: None = drop it (filter), else the (maybe truncated) tokens.

    ``truncation`` (when not filtering): ``error`` raises, ``left`` keeps the last ``max_len``
    tokens (the end of the chat template, where generation starts), ``right`` keeps the first.
    """
    if len(tokens) <= max_len:
        return tokens
    if filter_overlong:
        return None
    if truncation == "left":
        return tokens[-max_len:]
    if truncation == "right":
        return tokens[:max_len]
    raise DatasetError(
        f"a prompt has {len(tokens)} tokens > data.max_prompt_length={max_len} and data.truncation=error; "
        "raise data.max_prompt_length, set data.filter_overlong_prompts=true, or data.truncation=left|right"
    )


@dataclass
class PromptSource:
    """Loads a dataset, renders each question with the chat template, applies the over-long policy
    (dropped prompts are counted and reported, never lost silently) and serves shuffled step batches."""

    examples: list[Example]
    prompt_ids: dict[str, list[int]]
    batcher: PromptBatcher
    dropped_too_long: int
    truncated: int

    @classmethod
    def from_config(cls, data_cfg: Any, tokenizer: Any, batch_size: int) -> PromptSource:
        examples = load_gsm8k(data_cfg.train_path)
        rendered = [
            tokenizer.apply_chat_template(
                build_messages(ex.question, data_cfg.prompt_template),
                add_generation_prompt=True,
                tokenize=False,
            )
            for ex in examples
        ]
        encoded = tokenizer(rendered, add_special_tokens=False)["input_ids"]
        kept, ids, truncated = [], {}, 0
        for ex, tokens in zip(examples, encoded, strict=True):
            fitted = fit_prompt(
                list(tokens),
                data_cfg.max_prompt_length,
                data_cfg.filter_overlong_prompts,
                data_cfg.truncation,
            )
            if fitted is not None:
                kept.append(ex)
                ids[ex.uid] = fitted
                truncated += len(fitted) < len(tokens)
        dropped = len(examples) - len(kept)
        if dropped or truncated:
            print(
                f"data: {dropped} of {len(examples)} prompts dropped and {truncated} truncated for being longer "
                f"than data.max_prompt_length={data_cfg.max_prompt_length} tokens",
                file=sys.stderr,
            )
        if not kept:
            raise DatasetError(
                f"data.max_prompt_length={data_cfg.max_prompt_length}: every prompt in "
                f"{data_cfg.train_path} is longer; raise it"
            )
        batcher = PromptBatcher(kept, batch_size, data_cfg.shuffle_seed)
        return cls(kept, ids, batcher, dropped, truncated)

    @property
    def epochs_done(self) -> int:
        """Complete passes over the examples so far (a pass ends when its last example is served)."""
        state = self.batcher.state_dict()
        return state["epoch"] + (state["position"] == len(self.examples))

    def next_batch(self) -> DataProto:
        """``raw_prompt_ids``, ``uid``, ``question``, ``ground_truth`` for the next step's prompts."""
        batch = self.batcher.next_batch()
        return DataProto.from_dict(
            non_tensor={
                "raw_prompt_ids": [self.prompt_ids[ex.uid] for ex in batch],
                # one GRPO group per prompt of this step, even if an example repeats across an epoch edge
                "uid": np.array([f"{ex.uid}/{i}" for i, ex in enumerate(batch)], dtype=object),
                "question": np.array([ex.question for ex in batch], dtype=object),
                "ground_truth": np.array([ex.ground_truth for ex in batch], dtype=object),
            }
        )
