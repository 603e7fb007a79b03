"""One actor's memory estimate (:class:`ActorMemory`), what the per-role estimates read, and the helpers they share.

The per-role estimates (:mod:`placement.learner_memory`, :mod:`placement.inference_memory`) read the config and
the model's shape through :class:`EstimateInputs`, resolved once per plan by :func:`placement.memory.estimate_memory`,
and return each actor's bytes per component (:data:`COMPONENTS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from placement.model_shape import ModelShape

COMPONENTS = ("weights", "sync", "optimizer", "grads", "kv_cache", "activations", "logits", "runtime")


@dataclass(frozen=True)
class ActorMemory:
    """One actor's estimate: bytes per component on the host and on each accelerator it uses."""

    actor: str
    role: str
    device: str  # cpu | gpu | tpu
    host: dict[str, float]
    accel: dict[str, float] = field(default_factory=dict)  # per accelerator; empty on the CPU
    notes: tuple[str, ...] = ()

    @property
    def host_total(self) -> float:
        return sum(self.host.values())

    @property
    def accel_total(self) -> float:
        return sum(self.accel.values())


@dataclass(frozen=True)
class EstimateInputs:
    """What the per-role estimates read, resolved once."""

    cfg: Any
    policy: ModelShape
    params: int
    solver: ModelShape | None
    micro_batch_size: int
    accel_memory: dict[str, float | None]  # gpu / tpu: bytes per accelerator, None when unknown
    prompts_per_pass: int | None = None  # derived.prompts_per_pass_per_process
    weight_sync_dtype: str = "float32"  # derived.weight_sync_dtype: what a full weight sync's host copy holds


def components(parts: Mapping[str, float]) -> dict[str, float]:
    """``parts`` as floats in :data:`COMPONENTS` order, the zero and missing ones left out."""
    return {k: float(parts[k]) for k in COMPONENTS if parts.get(k)}


def config_value(node: Any, key: str, default: Any = None) -> Any:
    """``node.key`` or ``default`` when this schema has no such key (OmegaConf, dict or dataclass)."""
    if isinstance(node, Mapping) or hasattr(node, "get"):
        try:
            value = node.get(key, default)
        except Exception:  # noqa: BLE001 - a struct config refusing an unknown key
            return default
        return default if value is None else value
    value = getattr(node, key, default)
    return default if value is None else value
