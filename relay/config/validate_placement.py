"""Checks of where the roles run (:func:`relay.config.validate.validate` runs them): the learner's device mesh, each
role's Ray reservation, the placement group and its colocation groups, and the cluster's size. Each problem names the
key, the value and the fix.
"""

from __future__ import annotations

from typing import Any

from relay.config.checks import at_least, choice, positive
from relay.role_declarations import ROLE_NAMES, colocatable_roles

STRATEGIES = ("auto", "PACK", "STRICT_PACK", "SPREAD", "STRICT_SPREAD")


def check_mesh(p: list[str], lr: Any) -> None:
    """``learner.mesh``: known axes whose sizes cover the learner's devices, tensor parallelism within a host."""
    from relay.learner.sharding import AXES

    unknown = sorted(set(lr.mesh) - set(AXES))
    if unknown:
        p.append(f"learner.mesh has unknown axes {unknown}; the axes are {', '.join(AXES)}")
        return
    devices = max(lr.hosts, 1) * max(lr.devices_per_host, 1)
    sizes = {a: int(lr.mesh.get(a, 1)) for a in AXES}
    free = [a for a, v in sizes.items() if v == -1]
    fixed = 1
    for v in sizes.values():
        fixed *= v if v != -1 else 1
    if len(free) > 1 or any(v == 0 or v < -1 for v in sizes.values()):
        p.append(f"learner.mesh={sizes}: sizes must be >= 1, with at most one -1 (the rest of the devices)")
    elif (free and devices % fixed) or (not free and fixed != devices):
        p.append(
            f"learner.mesh={sizes} does not cover the {devices} learner devices (learner.hosts x "
            "learner.devices_per_host); make the product match or set one axis to -1"
        )
    else:
        tp = sizes["tp"] if sizes["tp"] != -1 else devices // fixed
        if lr.devices_per_host % tp:
            p.append(
                f"learner.mesh.tp={tp} must divide learner.devices_per_host={lr.devices_per_host}: "
                "tensor parallelism stays within a host (each host feeds its own rows)"
            )


def _colocate(p: list[str], groups: Any) -> None:
    """``placement.colocate``: groups of two or more known roles, each role in one group at most."""
    seen: set[str] = set()
    for i, group in enumerate(groups):
        key = f"placement.colocate[{i}]"
        members = list(group)
        if len(members) < 2:
            p.append(f"{key}={members}: a colocation group needs at least two roles, e.g. [actor_ref, learner]")
        for role in members:
            if role not in colocatable_roles():
                p.append(
                    f"{key}: unknown role {role!r}; roles that may share a bundle are {', '.join(colocatable_roles())}"
                )
            elif role in seen:
                p.append(f"{key}: role {role!r} is in more than one colocation group; merge the groups")
            seen.add(role)


def _cluster(p: list[str], c: Any) -> None:
    """``cluster``: node counts at least 0, each node's CPUs and memory above 0."""
    at_least(p, "cluster.nodes", c.nodes, 0)
    for key in ("gpus_per_node", "tpus_per_node", "tpu_hosts", "tpus_per_host"):
        at_least(p, f"cluster.{key}", c[key], 0)
    for key in ("cpus_per_node", "memory_gib_per_node", "cpus_per_tpu_host", "memory_gib_per_tpu_host"):
        positive(p, f"cluster.{key}", c[key])
    for key in ("gpu_memory_gib", "tpu_memory_gib"):
        if c[key] is not None:
            positive(p, f"cluster.{key}", c[key])


def check_resources(p: list[str], cfg: Any) -> None:
    """``<role>.resources`` of every role: a CPU reservation above 0, threads, memory and cores at least 0."""
    for role in ROLE_NAMES:
        res = cfg[role].resources
        if res.cpus <= 0:
            p.append(f"{role}.resources.cpus={res.cpus}: must be > 0 (a Ray CPU reservation for the role)")
        at_least(p, f"{role}.resources.threads", res.threads, 0)
        at_least(p, f"{role}.resources.memory_gib", res.memory_gib, 0.0)
        if any(core < 0 for core in res.cpu_affinity):
            p.append(f"{role}.resources.cpu_affinity={list(res.cpu_affinity)}: core numbers must be >= 0")


def check_placement(p: list[str], cfg: Any) -> None:
    """``placement`` (its strategy, timeout, memory headroom and colocation groups) and ``cluster``."""
    choice(p, "placement.strategy", cfg.placement.strategy, STRATEGIES)
    positive(p, "placement.timeout_s", cfg.placement.timeout_s)
    at_least(p, "placement.memory_headroom_gib", cfg.placement.memory_headroom_gib, 0.0)
    _colocate(p, cfg.placement.colocate)
    _cluster(p, cfg.cluster)
