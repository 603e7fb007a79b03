"""How much memory each role's actors need for a plan, estimated before anything starts (pure: no Ray, no JAX).

From the config and the model's HF ``config.json`` (read at ``model.path``; :mod:`placement.model_shape`) every
actor of the plan gets a small breakdown in bytes — ``weights``, ``sync`` (the policy weights arriving from, or
leaving, the learner), ``optimizer``, ``grads``, ``kv_cache``, ``activations``, ``logits``, ``runtime`` — for the
host (RAM) and, on a GPU or TPU, per accelerator. :func:`placement.memory_check.memory_report` adds the actors up
per node (the node each bundle lands on comes from :func:`placement.fit.place`) and per accelerator, and compares
them with each node's memory less ``placement.memory_headroom_gib``; :func:`placement.memory_check.failure_message`
is the table a :class:`PlacementError` carries.

Roles (one actor each, per the plan's slots): the learner's estimate is in :mod:`placement.learner_memory`,
rollout's, actor_ref's and reward's in :mod:`placement.inference_memory`; every coefficient they use is in
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
from placement.inference_memory import actor_ref_memory, reward_memory, rollout_memory, tools_memory
from placement.learner_memory import learner_memory
from placement.model_shape import ModelShape, count_params
from placement.plan import GIB, PlacementPlan
from relay.config.derive import derive


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
    actors = []
    for slot in plan.slots:
        ram = ram_of.get(slot.name)
        if slot.role == "rollout":
            actors.append(rollout_memory(inp, slot, ram))
        elif slot.role == "actor_ref":
            actors.append(actor_ref_memory(inp, slot))
        elif slot.role == "reward":
            actors.append(reward_memory(inp, slot, ram))
        elif slot.role == "tools":
            actors.append(tools_memory(inp, slot))
        else:
            actors.append(learner_memory(inp, slot))
    return MemoryEstimate(inp.params, tuple(actors))
