"""Where the node list for a plan check comes from: a running Ray cluster, a declared one, or this machine."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

from placement.nodes import KINDS, NodeView
from placement.plan import GIB


def declared_nodes(cluster: Any) -> list[NodeView]:
    """Nodes described by the config's ``cluster:`` section (all free); empty when ``cluster.nodes`` is null.
    Their RAM for the memory check is ``cluster.memory_gib_per_node`` / ``cluster.memory_gib_per_tpu_host``.

    Example: ``cluster.nodes=1 cluster.gpus_per_node=4 cluster.tpu_hosts=2 cluster.tpus_per_host=4``
    is one 4-GPU node and two 4-chip TPU hosts.
    """
    if cluster.nodes is None:
        return []
    out = []
    for i in range(cluster.nodes):
        res = {
            "CPU": float(cluster.cpus_per_node),
            "GPU": float(cluster.gpus_per_node),
            "TPU": float(cluster.tpus_per_node),
            "memory": float(cluster.memory_gib_per_node) * GIB,
        }
        out.append(_node(f"node-{i}", res, "cluster.memory_gib_per_node"))
    for i in range(cluster.tpu_hosts):
        res = {
            "CPU": float(cluster.cpus_per_tpu_host),
            "TPU": float(cluster.tpus_per_host),
            "memory": float(cluster.memory_gib_per_tpu_host) * GIB,
        }
        out.append(_node(f"tpu-host-{i}", res, "cluster.memory_gib_per_tpu_host"))
    return out


def _node(name: str, res: dict[str, float], ram_source: str = "", ram_bytes: float | None = None) -> NodeView:
    """A node with everything free; its RAM: ``ram_bytes``, or its declared ``memory`` when ``ram_source`` is set."""
    res = {k: v for k, v in res.items() if v}
    if ram_bytes is None and ram_source:
        ram_bytes = res.get("memory")
    return NodeView(name, res, dict(res), ram_bytes=ram_bytes, ram_source=ram_source)


def total_ram() -> float:
    """This machine's RAM in bytes (``MemTotal``)."""
    import psutil

    return float(psutil.virtual_memory().total)


def this_machine() -> list[NodeView]:
    """This machine as Ray would see it when ``trainer.py`` starts a local cluster (no Ray started)."""
    import psutil

    res = {
        "CPU": float(os.cpu_count() or 1),
        "GPU": float(_count_gpus()),
        # Ray offers ~70% of the available memory to tasks and actors by default.
        "memory": float(int(psutil.virtual_memory().available * 0.7)),
    }
    return [_node("this-machine", res, "total RAM of this machine", total_ram())]


def _count_gpus() -> int:
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def ray_nodes() -> list[NodeView]:
    """Alive nodes of the connected Ray cluster, each with its total and currently free resources, and its RAM
    (:func:`ray_node_ram`)."""
    import ray

    free_by_node = _free_per_node()
    here = ray.util.get_node_ip_address()
    out = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        total = {k: float(v) for k, v in n["Resources"].items() if k in KINDS}
        free = {k: float(v) for k, v in free_by_node.get(n["NodeID"], total).items() if k in KINDS}
        ram, source = ray_node_ram(n["Resources"], n["NodeManagerAddress"] == here)
        out.append(NodeView(node_name(n), total, free, ram, source))
    return out


def node_name(node: dict) -> str:
    """How Relay names a node (``ray.nodes()`` entry) in plans, events and messages: its address and the first
    8 hex digits of its id, e.g. ``10.0.0.2 (1f2e3d4c)`` (several raylets may share one address)."""
    return f"{node['NodeManagerAddress']} ({node['NodeID'][:8]})"


def node_names_by_id() -> dict[str, str]:
    """Every node Ray knows, alive or dead: node id -> :func:`node_name`."""
    import ray

    return {n["NodeID"]: node_name(n) for n in ray.nodes()}


def lost_nodes(names: set[str]) -> set[str]:
    """Of the nodes named ``names`` (:func:`node_name`), those that are gone: Ray lists them as dead, or their raylet
    refuses connections. A killed raylet refuses at once; Ray's own health check marks its node dead only after
    several missed checks (~15 s with Ray's defaults), and a role's death is reported before that."""
    import ray

    lost = set()
    for n in ray.nodes():
        name = node_name(n)
        if name in names and (not n.get("Alive") or not _accepts(n["NodeManagerAddress"], n["NodeManagerPort"])):
            lost.add(name)
    return lost


def _accepts(address: str, port: int, timeout_s: float = 2.0) -> bool:
    """Whether something accepts TCP connections at ``address:port``."""
    import socket

    try:
        with socket.create_connection((address, int(port)), timeout=timeout_s):
            return True
    except OSError:
        return False


def ray_node_ram(resources: dict[str, float], on_this_machine: bool) -> tuple[float | None, str]:
    """A Ray node's RAM for the memory check: this machine's total RAM when the node runs here; otherwise
    Ray's ``memory`` + ``object_store_memory`` resources, which Ray sizes from the RAM that was available when
    the node started (a lower bound of its RAM).

    Example: ``{"memory": 10e9, "object_store_memory": 4e9}`` on another machine -> ``(14e9, "Ray memory + ...")``.
    """
    if on_this_machine:
        return total_ram(), "total RAM of this machine"
    ram = float(resources.get("memory", 0.0)) + float(resources.get("object_store_memory", 0.0))
    return (ram or None), "Ray memory + object_store_memory (RAM available when the node started)"


def _free_per_node() -> dict[str, dict[str, float]]:
    # Ray has no public per-node "available" call; its state API keeps one (used by `ray status`).
    try:
        from ray._private.state import state

        return state.available_resources_per_node()
    except (ImportError, AttributeError):  # pragma: no cover - older/newer Ray: fall back to totals
        return {}


CURRENT_CLUSTER_FILE = Path("/tmp/ray/ray_current_cluster")


def ray_init_address(environ: dict[str, str] | None = None, current_cluster: Path = CURRENT_CLUSTER_FILE) -> str:
    """Where ``trainer.py`` connects: ``RAY_ADDRESS`` when set (``ray job submit`` sets it); else a
    cluster started on this machine with ``ray start`` whose GCS answers; else ``"local"`` (a new
    cluster for this run).

    Ray's own default would also follow ``/tmp/ray/ray_current_cluster``, but after a head is killed
    without ``ray stop`` that file points at a dead GCS and ``ray.init()`` hangs retrying it.
    """
    env = os.environ if environ is None else environ
    if env.get("RAY_ADDRESS"):
        return env["RAY_ADDRESS"]
    try:
        address = current_cluster.read_text().strip()
    except OSError:
        return "local"
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return address
    except (OSError, ValueError):
        return "local"
