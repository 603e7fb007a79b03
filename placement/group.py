"""Create the placement group for a plan and give each role's actor its scheduling strategy."""

from __future__ import annotations

import ray
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from placement.plan import PlacementError, PlacementPlan, check_fits, resource_table


def create_placement_group(plan: PlacementPlan, timeout_s: float) -> PlacementGroup:
    """Check the plan against the cluster, create its group and wait for it (bounded)."""
    cluster, available = ray.cluster_resources(), ray.available_resources()
    check_fits(plan, cluster, available)
    pg = placement_group(
        [dict(b.resources) for b in plan.bundles], strategy=plan.strategy, name="relay-roles"
    )
    try:
        ray.get(pg.ready(), timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        remove_placement_group(pg)
        raise PlacementError(
            f"placement group not ready after {timeout_s:g}s (placement.timeout_s).\n"
            f"{resource_table(plan, ray.cluster_resources(), ray.available_resources())}"
        ) from None
    return pg


def role_strategy(
    pg: PlacementGroup, plan: PlacementPlan, role: str, rank: int = 0
) -> PlacementGroupSchedulingStrategy:
    return PlacementGroupSchedulingStrategy(
        placement_group=pg,
        placement_group_bundle_index=plan.bundle_index(role, rank),
        placement_group_capture_child_tasks=True,
    )
