"""Tokenised prompts for each training step, as a DataProto the rollout role reads."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from relay.data.gsm8k import Example, PromptBatcher, build_messages, load_gsm8k
from relay.data_proto import DataProto


@dataclass
class PromptSource:
    """Loads a dataset, renders each question with the chat template, drops prompts over the length
    limit (counted and reported, never silently truncated) and serves shuffled step batches."""

    examples: list[Example]
    prompt_ids: dict[str, list[int]]
    batcher: PromptBatcher
    skipped_too_long: int

    @classmethod
    def from_config(cls, data_cfg, tokenizer, batch_size: int) -> PromptSource:
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
        kept, ids = [], {}
        for ex, tokens in zip(examples, encoded, strict=True):
            if len(tokens) <= data_cfg.max_prompt_length:
                kept.append(ex)
                ids[ex.uid] = list(tokens)
        skipped = len(examples) - len(kept)
        if skipped:
            print(
                f"data: skipped {skipped} of {len(examples)} prompts longer than "
                f"data.max_prompt_length={data_cfg.max_prompt_length} tokens",
                file=sys.stderr,
            )
        if not kept:
            raise ValueError(
                f"data.max_prompt_length={data_cfg.max_prompt_length}: every prompt in "
                f"{data_cfg.train_path} is longer; raise it"
            )
        return cls(kept, ids, PromptBatcher(kept, batch_size, data_cfg.shuffle_seed), skipped)

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
