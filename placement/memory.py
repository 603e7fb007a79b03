"""How much memory each role's actors need for a plan, estimated before anything starts (pure: no Ray, no JAX).

From the config and the model's HF ``config.json`` (read at ``model.path``; :mod:`placement.model_shape`) every
actor of the plan gets a small breakdown in bytes — ``weights``, ``sync`` (the policy weights arriving from, or
leaving, the learner), ``optimizer``, ``grads``, ``kv_cache``, ``activations``, ``logits``, ``runtime`` — for the
host (RAM) and, on a GPU or TPU, per accelerator. :func:`placement.memory_check.memory_report` adds the actors up
per node (the node each bundle lands on comes from :func:`placement.fit.place`) and per accelerator, and compares
them with each node's memory less ``placement.memory_headroom_gib``; :func:`placement.memory_check.failure_message`
is the table a :class:`PlacementError` carries.

Roles (one actor each, per the plan's slots): each role's declaration (:mod:`relay.role_declarations`, ``memory``)
names its estimate, ``estimate(inputs, slot, ram)``: the learner's in :mod:`placement.learner_memory`, the other
roles' in :mod:`placement.inference_memory`; every coefficient they use is in
:mod:`placement.memory_coefficients`, with where it was measured.

GPU/TPU roles: the device estimate is per accelerator and is checked against ``cluster.gpu_memory_gib`` /
``cluster.tpu_memory_gib`` when set. Their host side is kept simple — a fixed runtime per process plus the host
copies of weights they load or receive — and is not measured (this project's machines have no GPU).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from placement.actor_memory import ActorMemory, EstimateInputs, config_value
from placement.model_shape import ModelShape, count_params
from placement.plan import GIB, PlacementPlan
from relay.config.derive import derive
from relay.role_declarations import ROLE_DECLARATIONS, resolve


@dataclass(frozen=True)
class MemoryEstimate:
    """Every actor's estimate for a plan (``actors`` in the plan's slot order)."""

    model_params: int
    actors: tuple[ActorMemory, ...]

    def actor(self, name: str) -> ActorMemory:
        return next(a for a in self.actors if a.actor == name)


def estimate_memory(
    cfg: Any,
    plan: PlacementPlan,
    policy: ModelShape,
    solver: ModelShape | None = None,
    ram_of: Mapping[str, float] | None = None,
) -> MemoryEstimate:
    """Each actor of ``plan``: bytes per component. ``ram_of`` (actor name -> its node's RAM in bytes) sizes
    a KV cache given as a memory fraction; without it that cache is not counted (noted on the actor)."""
    derived, _, _ = derive(cfg)
    cluster = cfg.cluster
    accel = {
        "gpu": float(config_value(cluster, "gpu_memory_gib", 0.0)) * GIB or None,
        "tpu": float(config_value(cluster, "tpu_memory_gib", 0.0)) * GIB or None,
    }
    inp = EstimateInputs(
        cfg,
        policy,
        count_params(policy),
        solver,
        int(derived.micro_batch_size),
        accel,
        int(derived.prompts_per_pass_per_process),
        derived.weight_sync_dtype,
    )
    ram_of = ram_of or {}
    estimators = {r.name: resolve(r.memory) for r in ROLE_DECLARATIONS}  # each role's, by its declaration
    actors = [estimators[slot.role](inp, slot, ram_of.get(slot.name)) for slot in plan.slots]
    return MemoryEstimate(inp.params, tuple(actors))
