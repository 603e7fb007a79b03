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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
from omegaconf import OmegaConf
from ray.actor import ActorHandle
from ray.util.placement_group import PlacementGroup

from placement.cluster import node_names_by_id
from placement.group import create_placement_groups, remove_groups, slot_strategy
from placement.plan import ActorSlot, PlacementPlan, actor_copy_needed, actor_ref_computes_reference
from relay.config import LoadedConfig, RelayConfig
from relay.grpo.kl_controller import KLController
from relay.models.paths import solver_model_path
from relay.shared_weights import SharedWeights
from roles.env import runtime_env
from roles.tool_client import ToolsActorDied

# What a sync hands the engines: an object-store ref of the weights, or a handle of the learner's memory file.
Weights = ray.ObjectRef | SharedWeights


class RoleFailedError(RuntimeError):
    """A role's actor died or raised; the message names the actor and the phase.

    ``actor`` is the actor's name (``rollout-0``), ``role`` its role, ``died`` whether its process is
    gone (Ray may restart it) rather than the call raising, ``oom`` whether Ray's memory monitor killed it.
    """

    def __init__(self, message: str, actor: str = "", died: bool = False, oom: bool = False) -> None:
        super().__init__(message)
        self.actor = actor
        self.role = actor.rsplit("-", 1)[0] if "-" in actor else actor
        self.died = died
        self.oom = oom


@dataclass
class Roles:
    """The running actors, by role and rank, and the placement groups they sit in."""

    plan: PlacementPlan
    groups: dict[str, PlacementGroup]
    actors: dict[str, list[ActorHandle]] = field(default_factory=dict)
    namespace: str = ""
    # The weights every rollout replica and actor copy should hold (None: the initial checkpoint).
    weights_ref: Weights | None = None
    weights_version: int = 0
    # The actor_ref ranks hold an actor copy that follows the learner (algorithm.old_log_prob_source=actor).
    actor_copy: bool = False
    # What each actor's ready() reported, by name ("rollout-0": {...}), and the resolved trainer.weight_sync.
    ready_info: dict[str, dict] = field(default_factory=dict)
    weight_sync: str = "object_store"
    # The KL-in-reward coefficient's controller (algorithm.kl_ctrl), the driver's run state beside the actors:
    # the advantage phase reads and adapts it, checkpoints keep its value. None: a fixed algorithm.kl_coef.
    kl_control: KLController | None = None

    @property
    def rollout(self) -> list[ActorHandle]:
        return self.actors["rollout"]

    @property
    def actor_ref(self) -> list[ActorHandle]:
        """The actor_ref ranks; empty when the plan has none (nothing reads their log-probs)."""
        return self.actors.get("actor_ref", [])

    @property
    def reward(self) -> ActorHandle:
        return self.actors["reward"][0]

    @property
    def learners(self) -> list[ActorHandle]:
        """Every learner host's actor; rank 0 publishes the weights."""
        return self.actors["learner"]

    def weight_holders(self, role: str) -> list[ActorHandle]:
        """The actors of ``role`` that load the learner's weights at a sync: every rollout replica, and the
        actor_ref ranks only when they hold an actor copy (the reference model never changes)."""
        if role == "rollout" or (role == "actor_ref" and self.actor_copy):
            return self.actors.get(role, [])
        return []

    def handles(self) -> dict[str, ActorHandle]:
        """Every actor by its name, e.g. ``{"rollout-0": ..., "learner-0": ...}``."""
        return {f"{role}-{rank}": h for role, hs in self.actors.items() for rank, h in enumerate(hs)}


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
    res = cfg[slot.role].resources
    local_devices = cfg.learner.devices_per_host if slot.role == "learner" else 1
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
            jax_role=slot.role == "learner",
            local_devices=local_devices,
            visible_gpus=visible,
            shares_gpus=bool(neighbours) and slot.device == "gpu",
            deterministic=bool(cfg.trainer.deterministic),
            first_core=slot.rank * res.threads if slot.role == "rollout" else 0,  # replicas on their own cores
            cpu_affinity=list(res.cpu_affinity) or None,
            log_file=str(log_dir / f"{slot.name}.log") if log_dir is not None else None,
        ),
    }
    extra = {k: v for k, v in {"TPU": slot.tpus}.items() if v}
    if extra:
        opts["resources"] = extra
    if slot.memory_gib:
        opts["memory"] = int(slot.memory_gib * 2**30)
    if slot.role != "learner":  # a restarted learner would have lost its state: never restart it
        opts["max_restarts"] = int(cfg.trainer.role_restarts)
    return opts


def role_classes() -> dict[str, type]:
    """The actor class of each role."""
    from roles.actor_ref import ActorRefWorker
    from roles.learner import LearnerWorker
    from roles.reward import RewardWorker
    from roles.rollout import RolloutWorker
    from roles.tools import ToolsWorker

    return {
        "rollout": RolloutWorker,
        "actor_ref": ActorRefWorker,
        "reward": RewardWorker,
        "tools": ToolsWorker,
        "learner": LearnerWorker,
    }


def tools_role_config(cfg: RelayConfig) -> dict:
    """What a tools actor is built with: ``tools`` and the tool names ``rollout.agent.tools`` allows."""
    return {**OmegaConf.to_container(cfg.tools, resolve=True), "names": list(cfg.rollout.agent.tools)}


def _constructor_args(
    slot: ActorSlot, loaded: LoadedConfig, model_path: str, coordinator: str | None, namespace: str
) -> tuple:
    cfg, derived = loaded.cfg, loaded.derived.as_dict()
    c = OmegaConf.to_container(cfg, resolve=True)
    if slot.role == "rollout":
        prompts_per_pass = derived["prompts_per_pass_per_process"]
        seed = cfg.trainer.seed + 1009 * slot.rank  # replicas draw different samples
        lora, tools = c["model"]["lora"], c["tools"]
        bucket = cfg.train.length_bucket
        return (model_path, c["rollout"], c["data"], bucket, prompts_per_pass, seed, lora, tools, namespace)
    if slot.role == "tools":
        return (tools_role_config(cfg),)
    if slot.role == "actor_ref":
        threads = cfg.actor_ref.resources.threads
        offload = cfg.actor_ref.ref_param_offload
        with_actor, with_ref = actor_copy_needed(cfg), actor_ref_computes_reference(cfg)
        share = cfg.actor_ref.share_prompts
        return (model_path, cfg.actor_ref.micro_batch_size, threads, with_actor, slot.device, offload, with_ref, share)
    if slot.role == "reward":
        solver = str(solver_model_path(cfg, model_path)) if cfg.reward.mode == "solver" else None
        return (c["reward"], solver, cfg.trainer.seed, cfg.data.max_response_length)
    dist = None
    if coordinator is not None:
        dist = {"coordinator": coordinator, "num_processes": cfg.learner.hosts, "process_id": slot.rank}
    from relay.learner.settings import LearnerSettings

    return (model_path, LearnerSettings.from_config(cfg, derived), dist)


def resolve_weight_sync(setting: str, roles: Roles) -> str:
    """``trainer.weight_sync`` for these actors: ``auto`` is ``shared_memory`` when learner-0 and every weight
    holder reported the same node in ``ready()``, else ``object_store``; ``shared_memory`` across nodes is an
    error naming the actor that is elsewhere."""
    node = roles.ready_info.get("learner-0", {}).get("node_id")
    holders = [f"{role}-{i}" for role in ("rollout", "actor_ref") for i in range(len(roles.weight_holders(role)))]
    elsewhere = [name for name in holders if roles.ready_info.get(name, {}).get("node_id") != node]
    if setting == "object_store" or (setting == "auto" and (node is None or elsewhere)):
        return "object_store"
    if node is None or elsewhere:
        raise ValueError(
            f"trainer.weight_sync=shared_memory, but {', '.join(elsewhere) or 'learner-0'} did not report the "
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
    multi-node clusters); each is constructed with the role's usual arguments. ``log_dir``: each actor's output
    goes to ``log_dir/<actor>.log`` (the quiet terminal, :mod:`relay.run.logs`); None leaves it to Ray.
    """
    cfg = loaded.cfg
    classes = classes or role_classes()
    namespace = f"relay-{run_id or uuid.uuid4().hex[:8]}"
    groups = create_placement_groups(plan, cfg.placement.timeout_s, prefix=namespace)
    roles = Roles(plan, groups, {}, namespace, actor_copy=actor_copy_needed(cfg))
    roles.kl_control = KLController.from_config(cfg.algorithm)
    try:
        visible = _borrowed_gpus(plan, groups)
        coordinator = None
        if cfg.learner.hosts > 1:
            first = slot_strategy(groups, plan.slot("learner", 0))
            coordinator = ray.get(_coordinator_address.options(scheduling_strategy=first).remote())
        for slot in plan.slots:
            opts = _actor_options(slot, plan, groups, cfg, namespace, visible.get(slot.name), log_dir)
            args = _constructor_args(slot, loaded, str(model_path), coordinator, namespace)
            handle = ray.remote(classes[slot.role]).options(**opts).remote(*args)
            roles.actors.setdefault(slot.role, []).append(handle)
        named = roles.handles()
        ready = call(list(named), [h.ready.remote() for h in named.values()], "start-up")
        roles.ready_info = dict(zip(named, ready, strict=True))
        roles.weight_sync = resolve_weight_sync(cfg.trainer.weight_sync, roles)
        if roles.weight_sync == "shared_memory":
            call(["learner-0"], [roles.learners[0].set_weight_sync.remote("shared_memory")], "start-up")
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


def call(names: Sequence[str], refs: Sequence[ray.ObjectRef], phase: str) -> list[Any]:
    """``ray.get`` the refs, in the order they finish; a dead or failing actor becomes a :class:`RoleFailedError`
    naming it as soon as its ref resolves. Waiting on the refs together matters for a learner of several hosts:
    when one host stops and another's watchdog ends its process, the failure surfaces while learner-0 still waits
    on its stopped peer."""
    name_of = dict(zip(refs, names, strict=True))
    results: dict[ray.ObjectRef, Any] = {}
    remaining = list(dict.fromkeys(refs))  # ray.wait takes each ref once
    while remaining:
        done, remaining = ray.wait(remaining, num_returns=1)
        for ref in done:
            results[ref] = _get(name_of[ref], ref, phase)
    return [results[ref] for ref in refs]


def _get(name: str, ref: ray.ObjectRef, phase: str) -> Any:
    try:
        return ray.get(ref)
    except ray.exceptions.OutOfMemoryError as exc:
        message = f"role '{name}' was killed by Ray's memory monitor during {phase}: the node ran out of memory"
        raise RoleFailedError(message, name, died=True, oom=True) from exc
    except ray.exceptions.RayActorError as exc:
        oom = killed_for_memory(exc)
        how = "was killed for memory" if oom else "died"
        raise RoleFailedError(f"role '{name}' {how} during {phase}: {_first_line(exc)}", name, True, oom) from exc
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, ToolsActorDied):  # the rollout is fine; the tools actor it called is dead
            message = f"role '{cause.actor}' died during {phase} (called by '{name}')"
            raise RoleFailedError(message, cause.actor, True) from exc
        raise RoleFailedError(f"role '{name}' failed during {phase}: {_last_line(exc)}", name) from exc


def killed_for_memory(exc: BaseException) -> bool:
    """Whether a dead actor's error says Ray's memory monitor killed it (Ray words it "killed ... due to memory
    pressure" / "OutOfMemoryError" / "memory monitor", depending on where the death was noticed)."""
    text = f"{type(exc).__name__} {exc}".lower()
    return any(marker in text for marker in ("outofmemory", "out of memory", "memory pressure", "memory monitor"))


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _last_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(exc).__name__


def stop_roles(roles: Roles | None) -> None:
    if roles is None:
        return
    for handle in roles.handles().values():
        ray.kill(handle, no_restart=True)
    remove_groups(roles.groups)
