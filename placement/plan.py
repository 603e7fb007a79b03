"""A placement plan: which bundle each role's actor sits in, and whether the cluster can hold it.

Pure (no Ray calls): it takes the cluster's resource dicts as plain data, so the check runs and
is tested without a cluster, and always runs before any placement group is created.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ROLES = ("rollout", "actor_ref", "reward", "learner")


class PlacementError(RuntimeError):
    """The cluster cannot hold the plan; the message is a table for the user."""


@dataclass(frozen=True)
class RoleBundle:
    role: str
    rank: int
    resources: dict[str, float]  # e.g. {"CPU": 0.5} or {"CPU": 1, "GPU": 1}


@dataclass(frozen=True)
class PlacementPlan:
    bundles: tuple[RoleBundle, ...]
    strategy: str

    def bundle_index(self, role: str, rank: int = 0) -> int:
        for i, b in enumerate(self.bundles):
            if b.role == role and b.rank == rank:
                return i
        raise KeyError(f"no bundle for role {role!r} rank {rank}")

    def totals(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for b in self.bundles:
            for k, v in b.resources.items():
                out[k] = out.get(k, 0.0) + v
        return out


def build_plan(cfg: Any) -> PlacementPlan:
    """One bundle per role replica with the CPUs its config reserves (CPU-only roles for now)."""
    bundles = []
    for role in ROLES:
        replicas = cfg.rollout.replicas if role == "rollout" else 1
        for rank in range(replicas):
            bundles.append(RoleBundle(role, rank, {"CPU": float(cfg[role].resources.cpus)}))
    return PlacementPlan(tuple(bundles), cfg.placement.strategy)


def resource_table(plan: PlacementPlan, cluster: dict[str, float], available: dict[str, float]) -> str:
    """Role, what it asks, and (on the total row) what the cluster has and has free."""
    rows = [("role", "asks", "cluster has", "free now")]
    for b in plan.bundles:
        asks = ", ".join(f"{k}={v:g}" for k, v in b.resources.items())
        rows.append((f"{b.role}[{b.rank}]", asks, "", ""))
    totals = plan.totals()
    rows.append(
        (
            "total",
            ", ".join(f"{k}={v:g}" for k, v in totals.items()),
            ", ".join(f"{k}={cluster.get(k, 0):g}" for k in totals),
            ", ".join(f"{k}={available.get(k, 0):g}" for k in totals),
        )
    )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def check_fits(plan: PlacementPlan, cluster: dict[str, float], available: dict[str, float]) -> None:
    """Raise :class:`PlacementError` with a table when the plan asks for more than is there or free."""
    totals = plan.totals()
    short = [k for k, v in totals.items() if v > cluster.get(k, 0.0) + 1e-9]
    busy = [k for k, v in totals.items() if k not in short and v > available.get(k, 0.0) + 1e-9]
    if short:
        raise PlacementError(
            f"the cluster cannot hold this plan: it asks for more {', '.join(short)} than the cluster has.\n"
            f"{resource_table(plan, cluster, available)}\n"
            "Fix: lower the roles' resources (e.g. --set learner.resources.cpus=0.5) or add nodes."
        )
    if busy:
        raise PlacementError(
            f"not enough free {', '.join(busy)} right now (another job holds them).\n"
            f"{resource_table(plan, cluster, available)}\n"
            "Fix: wait for the other job, stop it, or lower the roles' resources."
        )
