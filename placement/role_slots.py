"""Each role's actors in a plan, before bundles are assigned: how many, on which device, in which dtype (pure).

One function per role, named by its declaration (:mod:`relay.role_declarations`, ``slots``), each
``slots(cfg, make) -> list[ActorSlot]``; ``make(role, rank, **fields)`` builds a slot with the role's
``<role>.resources`` reservation (:func:`placement.plan.role_actors`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from placement.plan import ACTOR_REF_DTYPE, ActorSlot, actor_ref_needed

MakeSlot = Callable[..., ActorSlot]


def rollout_slots(cfg: Any, make: MakeSlot) -> list[ActorSlot]:
    """``rollout.replicas`` actors, each with ``rollout.gpus_per_replica`` GPUs."""
    gpus = cfg.rollout.gpus_per_replica
    device, dtype = "gpu" if gpus else "cpu", str(cfg.rollout.dtype)
    return [make("rollout", rank, gpus=float(gpus), device=device, dtype=dtype) for rank in range(cfg.rollout.replicas)]


def actor_ref_slots(cfg: Any, make: MakeSlot) -> list[ActorSlot]:
    """One actor per GPU when ``actor_ref.gpus > 0``, else one CPU actor; none when nothing reads its log-probs
    (:func:`placement.plan.actor_ref_needed`)."""
    if not actor_ref_needed(cfg):
        return []
    gpus = cfg.actor_ref.gpus
    kw = {"gpus": 1.0 if gpus else 0.0, "device": "gpu" if gpus else "cpu", "dtype": ACTOR_REF_DTYPE}
    return [make("actor_ref", rank, **kw) for rank in range(max(1, gpus))]


def reward_slots(cfg: Any, make: MakeSlot) -> list[ActorSlot]:
    """One actor with ``reward.gpus`` GPUs (its grader processes share its bundle's CPUs)."""
    dtype = str(cfg.reward.solver_dtype) if cfg.reward.mode == "solver" else ""
    device = "gpu" if cfg.reward.gpus else "cpu"
    return [make("reward", 0, gpus=float(cfg.reward.gpus), device=device, dtype=dtype)]


def reward_model_slots(cfg: Any, make: MakeSlot) -> list[ActorSlot]:
    """One actor with ``reward_model.gpus`` GPUs when ``reward_model.enable``, else none."""
    rm = cfg.reward_model
    if not rm.enable:
        return []
    return [make("reward_model", 0, gpus=float(rm.gpus), device="gpu" if rm.gpus else "cpu", dtype="float32")]


def tools_slots(cfg: Any, make: MakeSlot) -> list[ActorSlot]:
    """``tools.workers`` CPU actors, only with ``rollout.agent.enable``."""
    return [make("tools", rank) for rank in range(cfg.tools.workers)] if cfg.rollout.agent.enable else []


def learner_slots(cfg: Any, make: MakeSlot) -> list[ActorSlot]:
    """``learner.hosts`` actors, each with the host's ``learner.devices_per_host`` GPUs or TPU chips."""
    lr, out = cfg.learner, []
    for rank in range(lr.hosts):
        kw: dict[str, Any] = {"device": lr.accelerator, "dtype": str(cfg.train.compute_dtype)}
        if lr.accelerator == "gpu":
            kw["gpus"] = float(lr.devices_per_host)
        elif lr.accelerator == "tpu":
            kw["tpus"] = float(lr.devices_per_host)
        out.append(make("learner", rank, **kw))
    return out
