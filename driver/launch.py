"""Start every role's actors in their placement-group bundles, and call them with errors that name the role.

Each actor is named after its plan slot (``rollout-0``, ``learner-1``) in the run's Ray namespace, so
the dashboard's actor list reads like ``trainer.py --print-plan``. Start-up order:

1. the plan is checked against the cluster and its placement groups are created (bounded wait);
2. colocated roles learn the GPU ids of the bundle they share (a probe task in the owner's bundle);
3. a multi-host learner gets a coordinator address on learner-0's node (the JAX distributed job);
4. every actor is created at once, and the driver waits for all of their ``ready()``.
"""

from __future__ import annotations

import socket
import uuid
from pathlib import Path
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup

from driver.role_group import RestartPolicy, Roles
from driver.role_settings import StartContext
from placement.cluster import lost_nodes, node_names_by_id
from placement.group import create_placement_groups, remove_groups, slot_strategy
from placement.plan import (
    ActorSlot,
    PlacementPlan,
    actor_copy_needed,
    actor_name,
)
from relay.config import LoadedConfig, RelayConfig
from relay.role_declarations import ROLE_DECLARATIONS, declaration, resolve
from relay.scoring.reward_sources import RewardSource
from roles.env import runtime_env
from roles.role_call import call


@ray.remote(num_cpus=0)
def _bundle_gpu_ids() -> list[str]:
    """The GPU ids of the bundle this task runs in (it asks for all of them)."""
    return [str(i) for i in ray.get_gpu_ids()]


@ray.remote(num_cpus=0)
def _coordinator_address() -> str:
    """``ip:port`` on this node with a port that was free a moment ago (JAX's coordinator binds it)."""
    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    return f"{ray.util.get_node_ip_address()}:{port}"


def _borrowed_gpus(plan: PlacementPlan, groups: dict[str, PlacementGroup]) -> dict[str, str]:
    """``{actor name: "CUDA_VISIBLE_DEVICES value"}`` for actors that run on another role's GPUs."""
    out: dict[str, str] = {}
    owner_ids: dict[tuple[str, int], list[str]] = {}
    for slot in plan.slots:
        if not slot.borrows_gpus_from:
            continue
        key = (slot.group, slot.bundle)
        if key not in owner_ids:
            bundle_gpus = plan.group(slot.group).bundles[slot.bundle]["GPU"]
            probe = _bundle_gpu_ids.options(num_gpus=bundle_gpus, scheduling_strategy=slot_strategy(groups, slot))
            owner_ids[key] = ray.get(probe.remote())
        ids = owner_ids[key][slot.gpu_offset : slot.gpu_offset + slot.borrowed_gpus]
        out[slot.name] = ",".join(ids)
    return out


def _actor_options(
    slot: ActorSlot,
    plan: PlacementPlan,
    groups: dict[str, PlacementGroup],
    cfg: RelayConfig,
    namespace: str,
    visible: str | None,
    log_dir: Path | None = None,
) -> dict:
    declared, res = declaration(slot.role), cfg[slot.role].resources
    local_devices = cfg.learner.devices_per_host if declared.jax else 1
    neighbours = [s for s in plan.slots if (s.group, s.bundle) == (slot.group, slot.bundle) and s != slot]
    opts: dict[str, Any] = {
        "name": slot.name,
        "namespace": namespace,
        "num_cpus": slot.cpus,
        "num_gpus": slot.gpus,
        "scheduling_strategy": slot_strategy(groups, slot),
        "runtime_env": runtime_env(
            res.threads,
            slot.device,
            jax_role=declared.jax,
            local_devices=local_devices,
            visible_gpus=visible,
            shares_gpus=bool(neighbours) and slot.device == "gpu",
            deterministic=bool(cfg.trainer.deterministic),
            first_core=slot.rank * res.threads if declared.own_cores else 0,  # replicas on their own cores
            cpu_affinity=list(res.cpu_affinity) or None,
            log_file=str(log_dir / f"{slot.name}.log") if log_dir is not None else None,
        ),
    }
    extra = {k: v for k, v in {"TPU": slot.tpus}.items() if v}
    if extra:
        opts["resources"] = extra
    if slot.memory_gib:
        opts["memory"] = int(slot.memory_gib * 2**30)
    if declared.restart == "relay":  # "never": a restarted actor would have lost its state (the learner's)
        opts["max_restarts"] = int(cfg.trainer.role_restarts)
    return opts


def role_classes() -> dict[str, type]:
    """The actor class of each role, as its declaration names it."""
    return {r.name: resolve(r.actor) for r in ROLE_DECLARATIONS}


def resolve_weight_sync(setting: str, roles: Roles) -> str:
    """``trainer.weight_sync`` for these actors: ``auto`` is ``shared_memory`` when learner-0 and every weight
    holder reported the same node in ``ready()``, else ``object_store``; ``shared_memory`` across nodes is an
    error naming the actor that is elsewhere."""
    publisher = actor_name("learner", 0)
    node = roles.ready_info.get(publisher, {}).get("node_id")
    holders = roles.weight_holder_names()
    elsewhere = [name for name in holders if roles.ready_info.get(name, {}).get("node_id") != node]
    if setting == "object_store" or (setting == "auto" and (node is None or elsewhere)):
        return "object_store"
    if node is None or elsewhere:
        raise ValueError(
            f"trainer.weight_sync=shared_memory, but {', '.join(elsewhere) or publisher} did not report the "
            "learner's node: a memory file is readable on one node only; set trainer.weight_sync=auto or object_store"
        )
    return "shared_memory"


def start_roles(
    loaded: LoadedConfig,
    plan: PlacementPlan,
    model_path: str,
    run_id: str | None = None,
    classes: dict[str, type] | None = None,
    log_dir: Path | None = None,
) -> Roles:
    """Create the placement groups and every role's actors (constructors run in parallel).

    ``classes`` replaces the role classes (tests place probe actors through this same path on fake
    multi-node clusters); each is constructed with the role's declared settings (:mod:`driver.role_settings`).
    ``log_dir``: each actor's output goes to ``log_dir/<actor>.log`` (the quiet terminal, :mod:`relay.run.logs`);
    None leaves it to Ray.
    """
    cfg = loaded.cfg
    classes = classes or role_classes()
    namespace = f"relay-{run_id or uuid.uuid4().hex[:8]}"
    groups = create_placement_groups(plan, cfg.placement.timeout_s, prefix=namespace)
    call_timeout = cfg.trainer.role_call_timeout_s
    restart = RestartPolicy(
        int(cfg.trainer.role_restarts),
        float(cfg.trainer.role_restart_timeout_s),
        None if call_timeout is None else float(call_timeout),
    )
    roles = Roles(plan, groups, namespace, actor_copy=actor_copy_needed(cfg), restart=restart)
    roles.reward_sources = tuple(RewardSource.from_config(entry) for entry in cfg.reward.sources)
    try:
        visible = _borrowed_gpus(plan, groups)
        from relay.learner.settings import LearnerSettings  # JAX: imported once roles start, not by the CLI

        learner_settings = LearnerSettings.from_config(cfg, loaded.derived.as_dict())
        coordinator = None
        if cfg.learner.hosts > 1:
            first = slot_strategy(groups, plan.slot("learner", 0))
            coordinator = ray.get(_coordinator_address.options(scheduling_strategy=first).remote())
        start = StartContext(loaded, str(model_path), namespace, learner_settings, coordinator)
        for slot in plan.slots:
            opts = _actor_options(slot, plan, groups, cfg, namespace, visible.get(slot.name), log_dir)
            args = resolve(declaration(slot.role).settings)(start, slot)  # the role's declared settings
            handle = ray.remote(classes[slot.role]).options(**opts).remote(*args)
            roles.group(slot.role).handles.append(handle)
        named = roles.handles()
        refs = [h.ready.remote() for h in named.values()]
        ready = call(list(named), refs, "start-up", restart.call_timeout_s)
        roles.ready_info = dict(zip(named, ready, strict=True))
        roles.weight_sync = resolve_weight_sync(cfg.trainer.weight_sync, roles)
        if roles.weight_sync == "shared_memory":
            roles.learner.answers(roles.learner.submit_to_first("set_weight_sync", "shared_memory"), "start-up")
    except BaseException:
        stop_roles(roles)
        raise
    return roles


def actor_nodes(roles: Roles) -> dict[str, str]:
    """Each actor's node as :func:`placement.cluster.node_name` names it, from what ``ready()`` reported, e.g.
    ``{"rollout-0": "10.0.0.2 (1f2e3d4c)", "learner-0": "10.0.0.3 (5a6b7c8d)"}``."""
    names = node_names_by_id()
    out = {}
    for actor, info in roles.ready_info.items():
        node_id = str(info.get("node_id") or "")
        out[actor] = names.get(node_id, node_id or "unknown")
    return out


def stop_roles(roles: Roles | None) -> None:
    if roles is None:
        return
    for handle in roles.handles().values():
        ray.kill(handle, no_restart=True)
    remove_groups(roles.placement_groups)


def lost_node(actor: str, nodes: dict[str, str]) -> tuple[str, list[str]] | None:
    """When ``actor``'s node is gone (:func:`placement.cluster.lost_nodes`): that node and every actor it held,
    from ``nodes`` (:func:`actor_nodes`); else None."""
    node = nodes.get(actor)
    if node is None or not lost_nodes({node}):
        return None
    return node, sorted(a for a, n in nodes.items() if n == node)
