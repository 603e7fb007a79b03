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
    # Strings that end a response early (kept in it): the agent loop's tool-call closing tag. Every engine stops
    # at them; a caller still cuts a response after the first one (relay.agent.loop.stop_index).
    stop: tuple[str, ...] = ()
    # The only tokens the engine may choose (a judge's yes/no); empty: all. The log-probs are then those of the
    # restricted, renormalised distribution (vLLM applies the mask before its processed log-softmax).
    allowed_token_ids: tuple[int, ...] = ()


@dataclass
class Generation:
    """One sampled response: its token ids (ending in EOS unless cut at the length limit)
    and ``log softmax(logits / temperature)`` of each sampled token under the engine's weights.

    A multi-turn response (:class:`relay.agent.trajectory.Trajectory`) also holds tool-result tokens: its
    ``loss_mask`` is 1 on the model's tokens and 0 on those (their ``log_probs`` are 0); None: every token is the
    model's."""

    token_ids: list[int]
    log_probs: list[float]
    finished: bool  # True when it ended with EOS, False when cut at max_new_tokens
    loss_mask: list[int] | None = None


class RolloutEngine(Protocol):
    """Samples ``n`` responses per prompt in one call, with per-token log-probs."""

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingSettings) -> list[list[Generation]]:
        """``result[i][j]`` is the ``j``-th of ``n`` samples for ``prompts[i]``."""
        ...

    def load_weights(self, named_tensors: dict[str, np.ndarray]) -> int:
        """Replace the engine's weights in place (HF names); return the bytes loaded."""
        ...
