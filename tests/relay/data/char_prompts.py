"""What the prompt-source tests build prompts with: a tokenizer of one token per character and a ``data`` config."""

from __future__ import annotations

from types import SimpleNamespace

DATA_DEFAULTS = {
    "prompt_template": "plain",
    "max_prompt_length": 1000,
    "filter_overlong_prompts": True,
    "truncation": "error",
    "max_prompt_chars": 0,
    "shuffle_seed": 0,
}


class CharTokenizer:
    """One token per character of a plain chat rendering: enough for PromptSource."""

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool, tokenize: bool) -> str:
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    def __call__(self, texts: list[str], add_special_tokens: bool) -> dict:
        return {"input_ids": [[ord(c) for c in text] for text in texts]}


def data_config(**fields: object) -> SimpleNamespace:
    """A ``data`` config section: :data:`DATA_DEFAULTS` with ``fields`` set over them."""
    return SimpleNamespace(**{**DATA_DEFAULTS, **fields})
