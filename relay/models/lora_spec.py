"""``model.lora`` as the learner reads it: rank, alpha, dropout and target projections, checked (no JAX here, so
config validation can use it before anything starts; the adapters themselves are :mod:`relay.models.lora`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ATTENTION_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_MODULES = ("gate_proj", "up_proj", "down_proj")
TARGET_MODULES = ATTENTION_MODULES + MLP_MODULES
COLLECTION = "lora"


@dataclass(frozen=True)
class LoraSpec:
    """``model.lora``: rank ``r``, ``alpha`` (scaling ``alpha / r``), dropout on the adapter's input, and the
    projections that get an adapter (names of :data:`TARGET_MODULES`)."""

    rank: int
    alpha: float
    target_modules: tuple[str, ...]
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.rank <= 0:
            raise ValueError(f"model.lora.rank={self.rank}: must be >= 1 (null model.lora = full fine-tuning)")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(
                f"model.lora.dropout={self.dropout}: must be in [0, 1) (the share of each adapter's inputs zeroed in "
                "the learner's update; PEFT's usual values are 0.0-0.1)"
            )
        unknown = sorted(set(self.target_modules) - set(TARGET_MODULES))
        if unknown or not self.target_modules:
            allowed = ", ".join(TARGET_MODULES)
            raise ValueError(f"model.lora.target_modules={list(self.target_modules)}: each must be one of {allowed}")

    @classmethod
    def from_config(cls, section: Any) -> LoraSpec | None:
        """The ``model.lora`` section (a mapping or config node; None: full fine-tuning) as a spec; raises
        ValueError naming the key for a bad rank or target module."""
        if section is None:
            return None
        return cls(
            int(section["rank"]), float(section["alpha"]), tuple(section["target_modules"]), float(section["dropout"])
        )

    @property
    def scaling(self) -> float:
        return self.alpha / self.rank
