"""The rollout engine interface every engine (vLLM, the default; transformers, the fallback) implements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class SamplingSettings:
    n: int
    max_new_tokens: int
    temperature: float = 1.0  # 0 = greedy (argmax); every engine supports it
    top_p: float = 1.0
    top_k: int = -1  # -1 = off
    seed: int | None = None


@dataclass
class Generation:
    """One sampled response: its token ids (ending in EOS unless cut at the length limit)
    and ``log softmax(logits / temperature)`` of each sampled token under the engine's weights."""

    token_ids: list[int]
    log_probs: list[float]
    finished: bool  # True when it ended with EOS, False when cut at max_new_tokens


class RolloutEngine(Protocol):
    """Samples ``n`` responses per prompt in one call, with per-token log-probs."""

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingSettings) -> list[list[Generation]]:
        """``result[i][j]`` is the ``j``-th of ``n`` samples for ``prompts[i]``."""
        ...

    def load_weights(self, named_tensors: dict[str, np.ndarray]) -> int:
        """Replace the engine's weights in place (HF names); return the bytes loaded."""
        ...
