"""Surviving a role actor that dies mid-run: wait for Ray to restart it, give it the current weights, retry.

rollout, actor_ref, reward and tools actors are started with ``max_restarts=trainer.role_restarts``: Ray
restarts a dead one in a fresh process, which holds the *initial* weights. Two cases:

- the driver's call fails with the actor's death (``RoleFailedError.died``): the phase is retried
  after the restarted actor got the last synced weights (a tools actor that dies under a rollout's tool calls
  fails the rollout's call with :class:`roles.tool_client.ToolsActorDied`, read as that tools actor's death);
- the actor died and was restarted between two calls, so nothing failed: its rollout then reports an
  old ``weights_version``, which the driver checks before using the samples; it resyncs and regenerates.

The learner is not restarted (its params and optimizer state would be lost): its death stops the
run, and ``--resume`` continues from the last checkpoint. A dead actor whose node is gone (:func:`lost_node`)
is reported with the node and every role it held.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import ray

from driver.launch import RoleFailedError, Roles, call
from placement.cluster import lost_nodes
from relay.config.schema import TrainerConfig

RESTARTABLE = ("rollout", "actor_ref", "reward", "tools")
T = TypeVar("T")


def wait_restarted(roles: Roles, role: str, timeout_s: float) -> None:
    """Block until every actor of ``role`` answers ``ready()`` again (Ray restarts it in the background, once a
    node has room for its bundle); after ``timeout_s`` (``trainer.role_restart_timeout_s``) a
    :class:`RoleFailedError` saying so. A call to an actor Ray is still restarting waits, so the wait is bounded
    here, not by the call."""
    deadline = time.monotonic() + timeout_s
    handles = roles.actors.get(role, [])
    names = [f"{role}-{i}" for i in range(len(handles))]
    while True:
        refs = [h.ready.remote() for h in handles]
        done, pending = ray.wait(refs, num_returns=len(refs), timeout=max(0.0, deadline - time.monotonic()))
        if pending:
            waiting = names[refs.index(pending[0])]
            raise RoleFailedError(
                f"role '{waiting}' was not restarted within trainer.role_restart_timeout_s={timeout_s:g} s "
                "(no node has room for its bundle, or its node is gone)",
                waiting,
                died=True,
            )
        try:
            roles.ready_info.update(zip(names, call(names, refs, "restart"), strict=True))  # possibly a new node
            return
        except RoleFailedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def lost_node(actor: str, actor_nodes: dict[str, str]) -> tuple[str, list[str]] | None:
    """When ``actor``'s node is gone (:func:`placement.cluster.lost_nodes`): that node and every actor it held,
    from ``actor_nodes`` (:func:`driver.launch.actor_nodes`); else None."""
    node = actor_nodes.get(actor)
    if node is None or not lost_nodes({node}):
        return None
    return node, sorted(a for a, n in actor_nodes.items() if n == node)


def resync(roles: Roles, role: str) -> None:
    """Give ``role``'s actors the last synced weights (no-op before the first sync, for reward, and for
    actor_ref without an actor copy: see ``Roles.weight_holders``)."""
    if roles.weights_ref is None:
        return
    handles = roles.weight_holders(role)
    refs = [h.load_weights.remote(roles.weights_ref, roles.weights_version) for h in handles]
    call([f"{role}-{i}" for i in range(len(handles))], refs, "resync after restart")


def with_recovery(fn: Callable[[], T], roles: Roles, trainer: TrainerConfig, on_recover: Callable[[str], None]) -> T:
    """Run ``fn``; when a restartable role's actor died, wait (at most ``trainer.role_restart_timeout_s``) for Ray
    to restart it, give it the weights and run ``fn`` again (at most ``trainer.role_restarts`` times). Any other
    failure, the learner's death, or a restart that does not come propagates."""
    attempts = int(trainer.role_restarts)
    for attempt in range(attempts + 1):
        try:
            return fn()
        except RoleFailedError as exc:
            if not exc.died or exc.role not in RESTARTABLE or attempt == attempts:
                raise
            wait_restarted(roles, exc.role, float(trainer.role_restart_timeout_s))
            resync(roles, exc.role)
            on_recover(exc.role)
    raise AssertionError("unreachable")
