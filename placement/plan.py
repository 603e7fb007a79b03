"""A placement plan: every role's actors, the bundle each sits in, and the bundle groups' strategies.

Pure (no Ray calls): the plan is built from the config alone, so ``--print-plan`` and the checks in
:mod:`placement.fit` run and are tested without a cluster, before any placement group exists.

How roles become actors (``role-rank``): each role's declaration (:mod:`relay.role_declarations`) names the
function of :mod:`placement.role_slots` that gives its actors, e.g. ``rollout.replicas`` rollout actors with
``rollout.gpus_per_replica`` GPUs each, or no actor_ref at all when nothing reads its log-probs.

Every actor gets its own bundle in the ``roles`` group, except that roles listed together in
``placement.colocate`` share one bundle: the member that needs the most GPUs reserves them and the
others run on the same device ids (``borrows_gpus_from``). A learner on TPU or on several hosts gets
its own ``learner`` group with one bundle per host, ``STRICT_SPREAD`` (one host per node).

Example: the 4-GPU preset (rollout 1 GPU, actor_ref 2 GPUs colocated with a 2-GPU learner, reward
1 GPU) is one ``roles`` group of three bundles: ``{GPU: 1}``, ``{GPU: 2}``, ``{GPU: 1}`` (plus CPUs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from placement.units import GIB
from relay.config.derive import derive
from relay.role_declarations import ROLE_DECLARATIONS, ROLE_NAMES, declaration, resolve


class PlacementError(RuntimeError):
    """The plan is impossible or the cluster cannot hold it; the message is for the user as is."""


class ActorName(str):
    """An actor's name as Ray, the dashboard, the logs and every error show it (``rollout-0``), carrying the role
    and rank it was built from, so nothing parses a name back. It pickles with both (an error naming a tools actor
    crosses from the rollout replica that called it to the driver).

    >>> name = actor_name("actor_ref", 1)
    >>> name, name.role, name.rank
    ('actor_ref-1', 'actor_ref', 1)
    """

    role: str
    rank: int

    def __new__(cls, role: str, rank: int) -> ActorName:
        name = super().__new__(cls, f"{role}-{rank}")
        name.role, name.rank = role, rank
        return name

    def __getnewargs__(self) -> tuple[str, int]:  # type: ignore[override]
        return self.role, self.rank


def actor_name(role: str, rank: int) -> ActorName:
    """The one place an actor's name is built.

    >>> actor_name("rollout", 0)
    'rollout-0'
    """
    return ActorName(role, rank)


@dataclass(frozen=True)
class ActorSlot:
    """One Ray actor of a role and what it asks of its bundle."""

    role: str
    rank: int
    group: str
    bundle: int
    cpus: float
    gpus: float = 0.0
    tpus: float = 0.0
    memory_gib: float = 0.0
    device: str = "cpu"  # cpu | gpu | tpu: what the role computes on
    dtype: str = ""  # what its model computes in (the learner's compute dtype; its masters are float32); "": no model
    borrows_gpus_from: str | None = None  # colocated: the role whose reserved GPUs this actor uses
    gpu_offset: int = 0  # with borrows_gpus_from: index of the first borrowed GPU among the owner's ids
    borrowed_gpus: int = 0  # with borrows_gpus_from: how many of the owner's GPUs this actor runs on

    @property
    def name(self) -> str:
        """The actor's name in Ray (and the dashboard's actor list), e.g. ``learner-1``."""
        return actor_name(self.role, self.rank)

    def asks(self) -> dict[str, float]:
        """The resources this actor itself requests (a borrower asks for no GPU)."""
        out = {"CPU": self.cpus, "GPU": self.gpus, "TPU": self.tpus, "memory": self.memory_gib * GIB}
        return {k: v for k, v in out.items() if v}


@dataclass(frozen=True)
class BundleGroup:
    """One Ray placement group: its bundles (Ray resource dicts) and strategy."""

    name: str
    strategy: str
    bundles: tuple[dict[str, float], ...]


@dataclass(frozen=True)
class PlacementPlan:
    groups: tuple[BundleGroup, ...]
    slots: tuple[ActorSlot, ...]

    def group(self, name: str) -> BundleGroup:
        for g in self.groups:
            if g.name == name:
                return g
        raise KeyError(f"no placement group {name!r}")

    def slot(self, role: str, rank: int = 0) -> ActorSlot:
        for s in self.slots:
            if s.role == role and s.rank == rank:
                return s
        raise KeyError(f"no actor for role {role!r} rank {rank}")

    def totals(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for g in self.groups:
            for b in g.bundles:
                for k, v in b.items():
                    out[k] = out.get(k, 0.0) + v
        return out


# The actor_ref role's torch models (reference, actor copy) compute in float32 on every device: their log-probs are
# the baseline the rollout's and the learner's are compared with.
ACTOR_REF_DTYPE = "float32"


def ref_model_needed(cfg: Any) -> bool:
    """Whether anyone reads the reference log-probs: the KL loss or the KL penalty in the reward."""
    return bool(cfg.algorithm.use_kl_loss or cfg.algorithm.use_kl_in_reward)


def reference_in_learner(cfg: Any) -> bool:
    """``derived.reference_in_learner``: whether the learner computes the reference log-probs."""
    derived, _, _ = derive(cfg)
    return derived.reference_in_learner


def actor_ref_computes_reference(cfg: Any) -> bool:
    """Whether the actor_ref role loads the reference model: someone reads it and the learner does not compute it."""
    return ref_model_needed(cfg) and not reference_in_learner(cfg)


def actor_copy_needed(cfg: Any) -> bool:
    """Whether the actor_ref role recomputes the old-policy log-probs with a synced copy of the policy."""
    return cfg.algorithm.old_log_prob_source == "actor"


def actor_ref_needed(cfg: Any) -> bool:
    """Whether the actor_ref role has anything to compute; without it the plan has no actor_ref actor.

    Examples: ``use_kl_loss=false use_kl_in_reward=false old_log_prob_source=learner`` -> False; KL loss on,
    ``algorithm.ref_log_prob_source=learner``, old log-probs from the learner -> False (the learner computes the
    reference).
    """
    return actor_ref_computes_reference(cfg) or actor_copy_needed(cfg)


def role_actors(cfg: Any) -> list[ActorSlot]:
    """Each role's actors with their own requests, before bundles are assigned (group/bundle unset): every
    declared role's ``slots`` (:mod:`placement.role_slots`), in declaration order. A warm start (``sft.enable``)
    trains the learner alone: no rollout, reference, reward or tools."""

    def make(role: str, rank: int, **kw: Any) -> ActorSlot:
        r = cfg[role].resources
        return ActorSlot(role, rank, "", -1, float(r.cpus), memory_gib=float(r.memory_gib), **kw)

    roles = [declaration("learner")] if cfg.sft.enable else ROLE_DECLARATIONS
    return [slot for role in roles for slot in resolve(role.slots)(cfg, make)]


def _learner_has_own_group(cfg: Any) -> bool:
    return cfg.learner.accelerator == "tpu" or cfg.learner.hosts > 1


def _check_colocation(cfg: Any, actors: list[ActorSlot]) -> None:
    for group in cfg.placement.colocate:
        members = list(group)
        if "learner" in members and _learner_has_own_group(cfg):
            raise PlacementError(
                f"placement.colocate={members}: the learner runs on {cfg.learner.hosts} host(s) of "
                f"{cfg.learner.accelerator} in its own spread group and cannot share a bundle; "
                "remove it from placement.colocate or set learner.hosts=1 and learner.accelerator=gpu|cpu"
            )
        kinds = {a.device for a in actors if a.role in members and a.device != "cpu"}
        if len(kinds) > 1:
            raise PlacementError(
                f"placement.colocate={members}: members compute on {sorted(kinds)}; colocate "
                "roles on the same kind of device"
            )


def _bundle_of(members: list[ActorSlot]) -> tuple[dict[str, float], list[ActorSlot], str]:
    """One shared bundle for colocated actors: (bundle, actors with borrowing set, owner role)."""
    gpu_by_role: dict[str, float] = {}
    for a in members:
        gpu_by_role[a.role] = gpu_by_role.get(a.role, 0.0) + a.gpus
    # The owner reserves the GPUs: the role needing the most; on a tie the learner, then config order.
    owner = max(gpu_by_role, key=lambda r: (gpu_by_role[r], r == "learner", -ROLE_NAMES.index(r)))
    owner_gpus = gpu_by_role[owner]
    placed = []
    for a in members:
        if a.role != owner and a.gpus:
            if a.gpus * (a.rank + 1) > owner_gpus:
                raise PlacementError(
                    f"{a.role} needs {gpu_by_role[a.role]:g} GPUs but shares the {owner_gpus:g} of {owner} "
                    f"(placement.colocate); give {owner} at least as many"
                )
            a = _replace(
                a, gpus=0.0, borrows_gpus_from=owner, gpu_offset=int(a.gpus) * a.rank, borrowed_gpus=int(a.gpus)
            )
        placed.append(a)
    bundle = {
        "CPU": sum(a.cpus for a in members),
        "GPU": owner_gpus,
        "TPU": sum(a.tpus for a in members),
        "memory": sum(a.memory_gib for a in members) * GIB,
    }
    return {k: v for k, v in bundle.items() if v}, placed, owner


def _replace(a: ActorSlot, **kw: Any) -> ActorSlot:
    from dataclasses import replace

    return replace(a, **kw)


def build_plan(cfg: Any, roles_strategy: str | None = None) -> PlacementPlan:
    """The plan for ``cfg``. ``roles_strategy`` resolves ``placement.strategy: auto`` (the caller knows
    the cluster: see :func:`placement.fit.resolve_strategy`); unresolved ``auto`` means STRICT_PACK.

    Raises :class:`PlacementError` for layouts no cluster can hold (e.g. a multi-host learner colocated).
    """
    actors = role_actors(cfg)
    _check_colocation(cfg, actors)
    own_learner_group = _learner_has_own_group(cfg)
    colocated = {role: i for i, group in enumerate(cfg.placement.colocate) for role in group}

    roles_bundles: list[dict[str, float]] = []
    learner_bundles: list[dict[str, float]] = []
    slots: list[ActorSlot] = []
    done_groups: set[int] = set()
    for a in actors:
        if a.role == "learner" and own_learner_group:
            learner_bundles.append(a.asks())
            slots.append(_replace(a, group="learner", bundle=len(learner_bundles) - 1))
        elif a.role in colocated:
            gi = colocated[a.role]
            if gi in done_groups:
                continue
            done_groups.add(gi)
            members = [m for m in actors if m.role in set(cfg.placement.colocate[gi])]
            bundle, placed, _ = _bundle_of(members)
            roles_bundles.append(bundle)
            slots += [_replace(m, group="roles", bundle=len(roles_bundles) - 1) for m in placed]
        else:
            roles_bundles.append(a.asks())
            slots.append(_replace(a, group="roles", bundle=len(roles_bundles) - 1))

    strategy = cfg.placement.strategy
    if strategy == "auto":
        strategy = roles_strategy or "STRICT_PACK"
    groups = [BundleGroup("roles", strategy, tuple(roles_bundles))]
    if learner_bundles:
        groups.append(BundleGroup("learner", "STRICT_SPREAD", tuple(learner_bundles)))
    order = {r: i for i, r in enumerate(ROLE_NAMES)}
    slots.sort(key=lambda s: (order[s.role], s.rank))
    return PlacementPlan(tuple(groups), tuple(slots))


def describe_plan(plan: PlacementPlan, node_of: dict[tuple[str, int], str] | None = None) -> str:
    """Human-readable plan: groups with their bundles, the node each lands on (when known), and
    which actor sits in which bundle."""
    lines = []
    for g in plan.groups:
        lines.append(f"placement group '{g.name}' ({g.strategy}, {len(g.bundles)} bundles)")
        for i, b in enumerate(g.bundles):
            actors = [s for s in plan.slots if s.group == g.name and s.bundle == i]
            who = ", ".join(_actor_label(s) for s in actors)
            node = f" on {node_of[(g.name, i)]}" if node_of and (g.name, i) in node_of else ""
            lines.append(f"  bundle {i}{node}: {format_resources(b)}  <- {who}")
    return "\n".join(lines)


def _actor_label(s: ActorSlot) -> str:
    label = f"{s.name} [{s.device}, {s.dtype}]" if s.dtype else f"{s.name} [{s.device}]"
    if s.borrows_gpus_from:
        ids = range(s.gpu_offset, s.gpu_offset + s.borrowed_gpus)
        label += f" (on {s.borrows_gpus_from}'s GPU {','.join(map(str, ids))})"
    return label


def format_resources(res: dict[str, float]) -> str:
    """``{"CPU": 4, "GPU": 1, "memory": 2**31}`` -> ``CPU=4, GPU=1, memory=2GiB``."""
    parts = []
    for k in ("CPU", "GPU", "TPU", "memory"):
        if res.get(k):
            parts.append(f"memory={res[k] / GIB:.3g}GiB" if k == "memory" else f"{k}={res[k]:g}")
    return ", ".join(parts) or "-"
