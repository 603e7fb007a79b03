"""Datasets and prompt construction."""

from relay.data.gsm8k import (
    PROMPT_TEMPLATES,
    SYSTEM_PROMPT,
    DatasetError,
    Example,
    PromptBatcher,
    build_messages,
    load_gsm8k,
)

__all__ = [
    "PROMPT_TEMPLATES",
    "SYSTEM_PROMPT",
    "DatasetError",
    "Example",
    "PromptBatcher",
    "build_messages",
    "load_gsm8k",
]
