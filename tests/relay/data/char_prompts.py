"""What the prompt-source tests build prompts with: a tokenizer of one token per character and a ``data`` config."""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from relay.config.data_schema import DataConfig

DATA_DEFAULTS = {"prompt_template": "plain", "max_prompt_length": 1000}


class CharTokenizer:
    """One token per character of a plain chat rendering: enough for PromptSource."""

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool, tokenize: bool) -> str:
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    def __call__(self, texts: list[str], add_special_tokens: bool) -> dict:
        return {"input_ids": [[ord(c) for c in text] for text in texts]}


def data_config(**fields: object) -> Any:
    """A ``data`` config section: the schema's defaults, then :data:`DATA_DEFAULTS`, then ``fields``."""
    return OmegaConf.merge(OmegaConf.structured(DataConfig), DATA_DEFAULTS, fields)
