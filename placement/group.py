"""Create a plan's placement groups (after the fit check) and give each actor its scheduling strategy."""

from __future__ import annotations

import logging
import time

import ray
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from placement.cluster import ray_nodes
from placement.fit import check_fits, resource_table
from placement.nodes import EPS, KINDS
from placement.plan import ActorSlot, PlacementError, PlacementPlan


def create_placement_groups(plan: PlacementPlan, timeout_s: float, prefix: str = "relay") -> dict[str, PlacementGroup]:
    """Check the plan against the cluster's nodes (:func:`placement.fit.check_fits`), then place its groups
    (:func:`place_groups`)."""
    check_fits(plan, ray_nodes())
    return place_groups(plan, timeout_s, prefix)


def place_groups(plan: PlacementPlan, timeout_s: float, prefix: str = "relay") -> dict[str, PlacementGroup]:
    """Create the plan's groups and wait for them (bounded). A group still pending after ``timeout_s`` (e.g. a
    node died, or another job took the resources after the fit check) is removed and reported with the fit
    check's table, never waited on forever."""
    groups: dict[str, PlacementGroup] = {}
    deadline = time.monotonic() + timeout_s
    try:
        for g in plan.groups:
            groups[g.name] = placement_group(
                [dict(b) for b in g.bundles], strategy=g.strategy, name=f"{prefix}-{g.name}"
            )
        for name, pg in groups.items():
            try:
                ray.get(pg.ready(), timeout=max(deadline - time.monotonic(), 0.1))
            except ray.exceptions.GetTimeoutError:
                raise PlacementError(
                    f"placement group '{name}' not ready after {timeout_s:g}s (placement.timeout_s).\n"
                    f"{resource_table(plan, ray_nodes())}"
                ) from None
    except BaseException:
        for pg in groups.values():
            remove_placement_group(pg)
        raise
    return groups


def slot_strategy(groups: dict[str, PlacementGroup], slot: ActorSlot) -> PlacementGroupSchedulingStrategy:
    return PlacementGroupSchedulingStrategy(
        placement_group=groups[slot.group],
        placement_group_bundle_index=slot.bundle,
        placement_group_capture_child_tasks=True,
    )


logger = logging.getLogger(__name__)


def remove_groups(groups: dict[str, PlacementGroup], wait_s: float = 15.0) -> None:
    """Remove the groups, then wait (at most ``wait_s``) until the cluster reports their resources free again.

    Ray releases a removed group asynchronously, so a job placed right after this one on the same cluster (a
    second ``trainer.py``, the next test) would otherwise read the old reservation in its fit check and be
    refused. The wait watches the cluster's free ``CPU``/``GPU``/``TPU``/``memory`` rise by what the groups
    reserved; if something else takes them meanwhile it gives up after ``wait_s`` with a warning, never an error.
    """
    if not groups:
        return
    reserved: dict[str, float] = {}
    for pg in groups.values():
        for bundle in pg.bundle_specs:
            for kind, amount in bundle.items():
                if kind in KINDS:
                    reserved[kind] = reserved.get(kind, 0.0) + float(amount)
    free_before = ray.available_resources()
    for pg in groups.values():
        remove_placement_group(pg)
    deadline = time.monotonic() + wait_s
    while True:
        free = ray.available_resources()
        if all(free.get(k, 0.0) >= free_before.get(k, 0.0) + v - EPS for k, v in reserved.items()):
            return
        if time.monotonic() > deadline:
            logger.warning("placement groups removed but their resources %s not free after %g s", reserved, wait_s)
            return
        time.sleep(0.1)
