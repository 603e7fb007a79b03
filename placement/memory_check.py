"""Do the roles' estimated memories fit the nodes they land on? The check, its report and its message.

:mod:`placement.memory` estimates each actor; this module sums the estimates per node (and per GPU/TPU) for the
placement :mod:`placement.fit` simulates, compares them with each node's memory less
``placement.memory_headroom_gib``, renders the table ``--print-plan`` and a refused plan show, and names the
keys that shrink the largest lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from placement.actor_memory import COMPONENTS, ActorMemory, config_value
from placement.memory import MemoryEstimate, estimate_memory
from placement.model_shape import ModelShape
from placement.nodes import NodeView
from placement.plan import GIB, ActorSlot, PlacementError, PlacementPlan

# --- per node: the check -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeMemory:
    """One node's sum of its actors' host estimates against its memory."""

    node: str
    actors: tuple[str, ...]
    need: float  # bytes: the actors' host totals
    headroom: float
    memory: float | None  # bytes; None: unknown (not checked)
    source: str  # where ``memory`` comes from

    @property
    def fits(self) -> bool:
        return self.memory is None or self.need + self.headroom <= self.memory


@dataclass(frozen=True)
class DeviceMemory:
    """One accelerator's sum of the estimates of the actors that run on it."""

    node: str
    device: str  # e.g. "GPU 1 of bundle roles[1]"
    kind: str  # gpu | tpu
    actors: tuple[str, ...]
    need: float
    memory: float | None

    @property
    def fits(self) -> bool:
        return self.memory is None or self.need <= self.memory


@dataclass(frozen=True)
class MemoryReport:
    """The estimate, where each actor lands, and the per-node and per-accelerator sums."""

    estimate: MemoryEstimate
    node_of: dict[str, str]  # actor -> node name
    nodes: tuple[NodeMemory, ...]
    devices: tuple[DeviceMemory, ...]
    notes: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        return all(n.fits for n in self.nodes) and all(d.fits for d in self.devices)


def node_memory(node: NodeView) -> tuple[float | None, str]:
    """A node's memory in bytes and where it comes from: its real RAM when known (``NodeView.ram_bytes``),
    else Ray's ``memory`` resource (a share of the RAM, so the check is stricter), else unknown."""
    if node.ram_bytes:
        return float(node.ram_bytes), node.ram_source or "RAM"
    if node.total.get("memory"):
        return float(node.total["memory"]), "Ray's memory resource (a share of the node's RAM)"
    return None, "unknown"


def _devices_of(slot: ActorSlot) -> list[int]:
    """The indices, within its bundle's reserved accelerators, of the ones this actor computes on."""
    if slot.borrows_gpus_from:
        return list(range(slot.gpu_offset, slot.gpu_offset + slot.borrowed_gpus))
    count = int(slot.gpus or slot.tpus)
    return list(range(count))


def memory_report(
    cfg: Any,
    plan: PlacementPlan,
    nodes: list[NodeView],
    where: Mapping[tuple[str, int], int],
    policy: ModelShape,
    solver: ModelShape | None = None,
) -> MemoryReport:
    """Sum the actors' estimates per node (``where``: (group, bundle) -> node index, from
    :func:`placement.fit.place`) and per accelerator, against each node's memory less
    ``placement.memory_headroom_gib``."""
    node_of = {s.name: nodes[where[(s.group, s.bundle)]].name for s in plan.slots if (s.group, s.bundle) in where}
    mem_of = {n.name: node_memory(n) for n in nodes}
    ram_of = {a: mem_of[n][0] for a, n in node_of.items() if mem_of[n][0]}
    est = estimate_memory(cfg, plan, policy, solver, ram_of)
    headroom = float(config_value(cfg.placement, "memory_headroom_gib", 0.0)) * GIB
    rows = []
    for n in nodes:
        here = [a for a in est.actors if node_of.get(a.actor) == n.name]
        if not here:
            continue
        memory, source = mem_of[n.name]
        rows.append(
            NodeMemory(n.name, tuple(a.actor for a in here), sum(a.host_total for a in here), headroom, memory, source)
        )
    accel: dict[tuple[str, str, int], list[ActorMemory]] = {}
    slots = {s.name: s for s in plan.slots}
    for a in est.actors:
        if not a.accel or a.actor not in node_of:
            continue
        s = slots[a.actor]
        for i in _devices_of(s):
            accel.setdefault((node_of[a.actor], f"{s.group}[{s.bundle}]", i), []).append(a)
    devices = []
    for (node, bundle, i), actors in accel.items():
        kind = actors[0].device
        devices.append(
            DeviceMemory(
                node,
                f"{kind.upper()} {i} of bundle {bundle}",
                kind,
                tuple(a.actor for a in actors),
                sum(a.accel_total for a in actors),
                config_value(cfg.cluster, f"{kind}_memory_gib", 0.0) * GIB or None,
            )
        )
    notes = []
    if any(d.memory is None for d in devices):
        notes.append("accelerator memory unknown: set cluster.gpu_memory_gib / cluster.tpu_memory_gib to check it")
    return MemoryReport(est, node_of, tuple(rows), tuple(devices), tuple(notes))


# --- rendering -----------------------------------------------------------------------------------------------


def _fmt(value: float | None) -> str:
    return "-" if not value else f"{value / GIB:.2f}"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
        for r in rows
    ]


def render_report(report: MemoryReport) -> str:
    """The estimate as a table (GiB): one row per actor (host, then each accelerator's share), then each
    node's total against its memory and each accelerator's against its size.

    Example row: ``learner-0  this-machine  0.50  0.50  1.00  1.11  -  5.93  0.32  2.10  11.46``.
    """
    cols = [c for c in COMPONENTS if any(a.host.get(c) or a.accel.get(c) for a in report.estimate.actors)]
    rows = [["actor", "node", *cols, "total"]]
    for a in report.estimate.actors:
        node = report.node_of.get(a.actor, "?")
        rows.append([a.actor, node, *(_fmt(a.host.get(c)) for c in cols), _fmt(a.host_total)])
        if a.accel:
            rows.append([f"  per {a.device.upper()}", "", *(_fmt(a.accel.get(c)) for c in cols), _fmt(a.accel_total)])
    lines = [f"memory estimate (GiB; model {report.estimate.model_params / 1e6:.1f}M params; placement.memory_check):"]
    lines += ["  " + line for line in _table(rows)]
    for n in report.nodes:
        verdict = "unknown, not checked" if n.memory is None else ("fits" if n.fits else "DOES NOT FIT")
        have = "?" if n.memory is None else f"{n.memory / GIB:.1f}"
        lines.append(
            f"  node {n.node}: {n.need / GIB:.2f} + headroom {n.headroom / GIB:.1f} (placement.memory_headroom_gib) "
            f"= {(n.need + n.headroom) / GIB:.2f} of {have} GiB [{n.source}]: {verdict}"
        )
    for d in report.devices:
        verdict = "size unknown, not checked" if d.memory is None else ("fits" if d.fits else "DOES NOT FIT")
        have = "?" if d.memory is None else f"{d.memory / GIB:.1f}"
        lines.append(f"  {d.device} on {d.node} ({', '.join(d.actors)}): {d.need / GIB:.2f} of {have} GiB: {verdict}")
    for a in report.estimate.actors:
        lines += [f"  note ({a.actor}): {note}" for note in a.notes]
    lines += [f"  note: {note}" for note in report.notes]
    return "\n".join(lines)


# What lowers each (role, component), for the message of a plan that does not fit.
FIXES: dict[tuple[str, str], str] = {
    ("learner", "activations"): "lower train.micro_batch_size (or train.per_device_micro_batch_size) or the row "
    "width (data.max_prompt_length + data.max_response_length, train.pack_width)",
    ("learner", "logits"): "lower data.max_response_length or train.pack_width (logit slots per row)",
    ("learner", "optimizer"): "set train.optimizer.name=lion (1 state tensor) or sgd (none)",
    ("learner", "grads"): "shard the learner state: learner.mesh.fsdp > 1",
    ("learner", "weights"): "shard the learner state: learner.mesh.fsdp > 1",
    ("rollout", "kv_cache"): "lower rollout.kv_cache_gib (or rollout.gpu_memory_utilization)",
    ("rollout", "activations"): "lower data.max_prompt_length + data.max_response_length (vLLM's profile batch)",
    ("actor_ref", "activations"): "lower actor_ref.micro_batch_size",
    ("actor_ref", "logits"): "lower actor_ref.micro_batch_size or data.max_response_length",
    ("actor_ref", "weights"): "set algorithm.old_log_prob_source=learner (no actor copy)",
    ("reward", "runtime"): "lower reward.workers",
    ("reward", "kv_cache"): "lower reward.solver_kv_cache_gib",
    ("tools", "runtime"): "lower tools.concurrency or tools.memory_mb (python calls at their limit)",
}
# A learner whose activations matter: remat (layers kept by their input only); on GPU/TPU also bfloat16.
ACCELERATOR_LEARNER_FIXES = ("set train.remat=true", "set train.compute_dtype=bfloat16")


def fixes_for(report: MemoryReport, actors: Iterable[str], on_device: bool = False) -> list[str]:
    """What to change, for the biggest components of ``actors`` (their host lines, or per-accelerator lines
    with ``on_device``), largest first.

    Example: a CPU learner whose activations dominate -> ``["lower train.micro_batch_size (...) or the row
    width (...)", ...]``.
    """
    parts: list[tuple[float, ActorMemory, str]] = []
    for a in report.estimate.actors:
        if a.actor in actors:
            lines = a.accel if on_device else a.host
            parts += [(lines.get(c, 0.0), a, c) for c in COMPONENTS if lines.get(c)]
    out: list[str] = []
    lines_used = 0
    for _, a, comp in sorted(parts, key=lambda p: -p[0]):
        if a.device == "cpu" and (a.role, comp) in (("learner", "grads"), ("learner", "weights")):
            continue  # CPU devices of one process share its RAM: sharding does not lower it
        fixes = [FIXES.get((a.role, comp), "")]
        if (a.role, comp) == ("learner", "activations"):
            fixes += list(ACCELERATOR_LEARNER_FIXES[: 2 if a.device != "cpu" else 1])
        new = [f for f in fixes if f and f not in out]
        if new and lines_used < 4:  # the four largest lines that have a fix
            out += new
            lines_used += 1
    return out


def failure_message(report: MemoryReport, table: bool = True) -> str:
    """The :class:`PlacementError` message of a plan whose estimate does not fit: what is short, the table
    (``table``), then what to change."""
    short = [n for n in report.nodes if not n.fits and n.memory]
    short_dev = [d for d in report.devices if not d.fits and d.memory]
    where = [f"node {n.node} needs {(n.need + n.headroom) / GIB:.1f} of {n.memory / GIB:.1f} GiB" for n in short]
    where += [f"{d.device} on {d.node} needs {d.need / GIB:.1f} of {d.memory / GIB:.1f} GiB" for d in short_dev]
    fixes = fixes_for(report, {a for n in short for a in n.actors})
    fixes += [f for f in fixes_for(report, {a for d in short_dev for a in d.actors}, on_device=True) if f not in fixes]
    body = f"\n{render_report(report)}" if table else ""
    return (
        f"the roles' estimated memory does not fit: {'; '.join(where)}.{body}\n"
        f"Fix (largest lines first): {'; '.join(fixes) or 'lower the roles sizes'}; or give the roles more or "
        "larger nodes (placement.colocate, cluster.*). placement.memory_headroom_gib is the RAM kept free per node "
        "for the driver and Ray; placement.memory_check=false skips this check."
    )


def check_report(report: MemoryReport) -> None:
    """Raise :class:`PlacementError` with :func:`failure_message` when ``report`` does not fit."""
    if not report.fits:
        raise PlacementError(failure_message(report))


def report_to_dict(report: MemoryReport) -> dict[str, Any]:
    """The estimate as plain data for the run's manifest (GiB, 3 decimals).

    Example: ``{"model_params": 134515008, "fits": True, "actors": {"learner-0": {"node": "...",
    "host_gib": {"weights": 0.501, ...}, "host_total_gib": 11.5}}, "nodes": {...}, "devices": [...]}``.
    """

    def gib(parts: Mapping[str, float]) -> dict[str, float]:
        return {k: round(v / GIB, 3) for k, v in parts.items()}

    actors = {}
    for a in report.estimate.actors:
        entry: dict[str, Any] = {
            "role": a.role,
            "device": a.device,
            "node": report.node_of.get(a.actor),
            "host_gib": gib(a.host),
            "host_total_gib": round(a.host_total / GIB, 3),
        }
        if a.accel:
            entry |= {"per_accelerator_gib": gib(a.accel), "per_accelerator_total_gib": round(a.accel_total / GIB, 3)}
        if a.notes:
            entry["notes"] = list(a.notes)
        actors[a.actor] = entry
    nodes = {
        n.node: {
            "estimate_gib": round(n.need / GIB, 3),
            "headroom_gib": round(n.headroom / GIB, 3),
            "memory_gib": None if n.memory is None else round(n.memory / GIB, 3),
            "memory_source": n.source,
            "fits": n.fits,
        }
        for n in report.nodes
    }
    devices = [
        {
            "node": d.node,
            "device": d.device,
            "actors": list(d.actors),
            "estimate_gib": round(d.need / GIB, 3),
            "memory_gib": None if d.memory is None else round(d.memory / GIB, 3),
            "fits": d.fits,
        }
        for d in report.devices
    ]
    return {
        "model_params": report.estimate.model_params,
        "fits": report.fits,
        "actors": actors,
        "nodes": nodes,
        "devices": devices,
        "notes": list(report.notes),
    }
