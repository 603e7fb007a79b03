"""The cluster a node-loss campaign (``python -m benchmarks.faults.chaos --nodes 3``) runs on.

An isolated head with no CPUs of its own and ``n`` 2-CPU raylets on loopback addresses (127.0.0.2, 127.0.0.3, …),
the roles' reservations (:data:`NODE_LAYOUT`) putting rollout and learner on different nodes, so that with three
nodes one is idle. A ``kill_node`` fault (:mod:`relay.faults`) SIGKILLs the raylet of the role actor that reaches
its point (``stop_node`` SIGSTOPs it: the GCS's health check counts the node dead once it gives up on it): a lost
rollout node is replaced by Ray on the idle one (Relay recovers), a lost learner node ends the run and ``--resume``
continues on the nodes left. After each fault :meth:`NodeCluster.restore` starts a raylet in place
of every one lost, as a user would replace a lost machine, so every fault meets the same cluster.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from benchmarks.harness.ray_head import Head, active_node_count, isolated_head, raylet_alive, worker_node

# Rollout and learner each need 1.5 of a node's 2 CPUs: never on one node; the reward fits beside either.
NODE_LAYOUT = ("rollout.resources.cpus=1.5", "learner.resources.cpus=1.5", "reward.resources.cpus=0.5")


@dataclass
class NodeCluster:
    """The head and its worker raylets, by loopback address (each with the ExitStack that tears it down)."""

    head: Head
    nodes: dict[str, tuple[int, contextlib.ExitStack]] = field(default_factory=dict)

    def add(self, ip: str) -> None:
        stack = contextlib.ExitStack()
        pid = stack.enter_context(worker_node(self.head, num_cpus=2, ip=ip))
        self.nodes[ip] = (pid, stack)

    def lost(self) -> list[str]:
        """The addresses whose raylet is gone or stopped."""
        return [ip for ip, (pid, _) in self.nodes.items() if not raylet_alive(pid)]

    def restore(self, timeout_s: float = 120.0) -> list[str]:
        """Start a raylet at each address whose raylet was lost; the addresses replaced. First wait until Ray counts
        the lost nodes dead (its health check takes some seconds): a replacement that joins while a lost node is still
        listed would look to :func:`worker_node` as if no node had joined."""
        replaced = self.lost()
        deadline = time.monotonic() + timeout_s
        alive = 1 + len(self.nodes) - len(replaced)  # the head counts as a node
        while replaced and active_node_count(self.head) > alive and time.monotonic() < deadline:
            time.sleep(1.0)
        for ip in replaced:
            self.nodes.pop(ip)[1].close()
            self.add(ip)
        return replaced

    def close(self) -> None:
        for _, stack in self.nodes.values():
            stack.close()
        self.nodes.clear()


@contextlib.contextmanager
def node_cluster(workers: int) -> Iterator[NodeCluster]:
    """An isolated head (0 CPUs) and ``workers`` 2-CPU raylets at 127.0.0.2 onwards; all torn down on exit."""
    with isolated_head(num_cpus=0) as head:
        cluster = NodeCluster(head)
        try:
            for i in range(workers):
                cluster.add(f"127.0.0.{i + 2}")
            yield cluster
        finally:
            cluster.close()
