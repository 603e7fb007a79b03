"""Can this cluster hold the plan? Checked bundle by bundle against each node, before any group exists.

Ray places a bundle on one node, so totals are not enough: a ``{GPU: 2}`` bundle needs a node with
two GPUs, and a ``STRICT_PACK`` group needs one node with all of its bundles. :func:`check_fits`
simulates Ray's placement on the nodes' totals (can the cluster ever hold it?) and then on what is
free now (is another job holding it?), and raises :class:`PlacementError` with a table otherwise.

:func:`plan_for` also checks memory (``placement.memory_check``): each actor's estimate
(:mod:`placement.memory`) summed over the node its bundle lands on must fit that node's memory less
``placement.memory_headroom_gib``, and each GPU's or TPU chip's its size, before any actor starts.
"""

from __future__ import annotations

from typing import Any

from placement.memory_check import (
    MemoryReport,
    check_report,
    failure_message,
    memory_report,
    render_report,
    report_to_dict,
)
from placement.model_shape import ModelShapeError, model_shapes
from placement.nodes import EPS, KINDS, NodeView
from placement.plan import GIB, PlacementError, PlacementPlan, build_plan, describe_plan, format_resources


def _fits(need: dict[str, float], have: dict[str, float]) -> bool:
    return all(v <= have.get(k, 0.0) + EPS for k, v in need.items())


def _take(have: dict[str, float], need: dict[str, float]) -> None:
    for k, v in need.items():
        have[k] = have.get(k, 0.0) - v


def _sum(bundles: tuple[dict[str, float], ...]) -> dict[str, float]:
    out: dict[str, float] = {}
    for b in bundles:
        for k, v in b.items():
            out[k] = out.get(k, 0.0) + v
    return out


def place(plan: PlacementPlan, capacity: list[dict[str, float]]) -> tuple[dict[tuple[str, int], int], str | None]:
    """Simulate Ray's placement: ``({(group, bundle): node index}, None)`` or ``(partial, reason)``.

    ``capacity`` is consumed in place. PACK/SPREAD are first-fit (PACK prefers nodes the group already
    uses); STRICT_PACK needs one node for the whole group; STRICT_SPREAD one distinct node per bundle.
    """
    where: dict[tuple[str, int], int] = {}
    for g in plan.groups:
        if g.strategy == "STRICT_PACK":
            need = _sum(g.bundles)
            node = next((i for i, c in enumerate(capacity) if _fits(need, c)), None)
            if node is None:
                return where, f"group '{g.name}' is STRICT_PACK and no single node has {format_resources(need)}"
            _take(capacity[node], need)
            where.update({(g.name, b): node for b in range(len(g.bundles))})
            continue
        used: list[int] = []
        for b, bundle in enumerate(g.bundles):
            order = list(range(len(capacity)))
            if g.strategy == "PACK":
                order = used + [i for i in order if i not in used]
            elif g.strategy in ("SPREAD", "STRICT_SPREAD"):
                order = [i for i in order if i not in used] + ([] if g.strategy == "STRICT_SPREAD" else used)
            node = next((i for i in order if _fits(bundle, capacity[i])), None)
            if node is None:
                spread = " on a node of its own (STRICT_SPREAD)" if g.strategy == "STRICT_SPREAD" else ""
                return where, f"group '{g.name}' bundle {b} ({format_resources(bundle)}) fits no node{spread}"
            _take(capacity[node], bundle)
            used.append(node)
            where[(g.name, b)] = node
    return where, None


def resolve_strategy(plan_total_roles: dict[str, float], nodes: list[NodeView]) -> str:
    """``placement.strategy: auto``: STRICT_PACK when one node can hold the roles group, else PACK."""
    return "STRICT_PACK" if any(_fits(plan_total_roles, n.total) for n in nodes) else "PACK"


def _cluster_sum(nodes: list[NodeView], attr: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for n in nodes:
        for k, v in getattr(n, attr).items():
            if k in KINDS:
                out[k] = out.get(k, 0.0) + v
    return out


def resource_table(plan: PlacementPlan, nodes: list[NodeView]) -> str:
    """Per actor what it asks (and which bundle); per resource what the cluster has and has free; per node."""
    kinds = [k for k in KINDS if plan.totals().get(k)]
    has, free = _cluster_sum(nodes, "total"), _cluster_sum(nodes, "free")
    rows = [("actor", "bundle", "asks", "cluster has", "free now")]
    for s in plan.slots:
        asks = format_resources(s.asks()) + (f" + {s.borrows_gpus_from}'s GPUs" if s.borrows_gpus_from else "")
        rows.append((s.name, f"{s.group}[{s.bundle}]", asks, "", ""))
    for k in kinds:
        total = plan.totals()[k]
        fmt = (lambda v: f"{v / GIB:.3g}GiB") if k == "memory" else (lambda v: f"{v:g}")
        rows.append((f"total {k}", "", fmt(total), fmt(has.get(k, 0.0)), fmt(free.get(k, 0.0))))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.append("nodes:")
    for n in nodes:
        lines.append(f"  {n.name}: has {format_resources(n.total)}; free {format_resources(n.free)}")
    return "\n".join(lines)


def check_fits(plan: PlacementPlan, nodes: list[NodeView]) -> dict[tuple[str, int], int]:
    """Where each bundle would go; :class:`PlacementError` with the table when the cluster cannot hold
    the plan at all, or cannot right now because other jobs hold what it needs."""
    if not nodes:
        raise PlacementError("the cluster has no alive nodes")
    _, reason = place(plan, [dict(n.total) for n in nodes])
    if reason:
        short = [k for k, v in plan.totals().items() if v > _cluster_sum(nodes, "total").get(k, 0.0) + EPS]
        what = f"it asks for more {', '.join(short)} than the cluster has" if short else reason
        raise PlacementError(
            f"the cluster cannot hold this plan: {what}.\n{resource_table(plan, nodes)}\n"
            "Fix: lower the roles' resources (e.g. --set learner.resources.cpus=0.5), colocate roles "
            "(placement.colocate), or add nodes."
        )
    where, reason = place(plan, [dict(n.free) for n in nodes])
    if reason:
        busy = [k for k, v in plan.totals().items() if v > _cluster_sum(nodes, "free").get(k, 0.0) + EPS]
        what = f"not enough free {', '.join(busy)} right now" if busy else f"not placeable right now: {reason}"
        raise PlacementError(
            f"{what} (another job or actor holds them).\n{resource_table(plan, nodes)}\n"
            "Fix: wait for the other job, stop it (`ray list actors`, `ray list placement-groups`), "
            "or lower the roles' resources."
        )
    return where


def plan_for(cfg: Any, nodes: list[NodeView], check_memory: bool = True) -> PlacementPlan:
    """The plan for ``cfg`` on these nodes (``placement.strategy: auto`` resolved against them).

    With ``check_memory`` and ``placement.memory_check``, a plan whose estimated memory does not fit a node
    (or an accelerator) raises :class:`PlacementError` with the table (:func:`estimate_on_nodes`).
    """
    roles_total = _sum(build_plan(cfg).group("roles").bundles)
    plan = build_plan(cfg, resolve_strategy(roles_total, nodes))
    if check_memory and cfg.placement.memory_check:
        report, _ = estimate_on_nodes(cfg, plan, nodes)
        if report is not None:
            check_report(report)
    return plan


def estimate_on_nodes(cfg: Any, plan: PlacementPlan, nodes: list[NodeView]) -> tuple[MemoryReport | None, str]:
    """The memory estimate of ``plan`` placed on ``nodes`` as Ray would (on their totals): ``(report, "")``,
    or ``(None, why not)`` when the model's config.json cannot be read or the plan does not fit the nodes'
    resources (the resource check reports that)."""
    from relay.models.paths import ModelPathError

    try:
        policy, solver = model_shapes(cfg)
    except (ModelPathError, ModelShapeError, OSError, ValueError) as exc:
        return None, f"not estimated: {exc}"
    where, reason = place(plan, [dict(n.total) for n in nodes])
    if reason:
        return None, f"not estimated: the plan does not fit the nodes' resources ({reason})"
    return memory_report(cfg, plan, nodes, where, policy, solver), ""


def memory_estimate(cfg: Any, nodes: list[NodeView]) -> dict[str, Any] | None:
    """The plan's memory estimate on ``nodes`` as plain data (GiB per actor and component, per node against
    its memory), for a run's manifest; None when it cannot be made (no model config, plan does not fit)."""
    plan = plan_for(cfg, nodes, check_memory=False)
    report, _ = estimate_on_nodes(cfg, plan, nodes)
    return None if report is None else report_to_dict(report)


def print_plan(cfg: Any, nodes: list[NodeView], source: str) -> tuple[str, bool]:
    """``--print-plan``: the plan, where each bundle would land, the memory estimate, and whether the cluster
    can hold it now (resources and, with ``placement.memory_check``, memory)."""
    plan = plan_for(cfg, nodes, check_memory=False)
    lines = [f"cluster: {source}"]
    try:
        where = check_fits(plan, nodes)
    except PlacementError as exc:
        lines += [describe_plan(plan), "", f"does not fit: {exc}"]
        return "\n".join(lines), False
    lines += [
        describe_plan(plan, {k: nodes[i].name for k, i in where.items()}),
        "",
        resource_table(plan, nodes),
        "",
    ]
    report, why = estimate_on_nodes(cfg, plan, nodes)
    if report is None:
        lines.append(f"memory estimate {why}")
    else:
        lines.append(render_report(report))
        if cfg.placement.memory_check and not report.fits:
            lines += ["", f"does not fit: {failure_message(report, table=False)}"]
            return "\n".join(lines), False
    lines.append("fits: yes")
    return "\n".join(lines), True
