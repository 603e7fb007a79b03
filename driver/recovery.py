"""Surviving a role actor that dies mid-run: wait for Ray to restart it, give it the current weights, retry.

rollout, actor_ref and reward actors are started with ``max_restarts=trainer.role_restarts``: Ray
restarts a dead one in a fresh process, which holds the *initial* weights. Two cases:

- the driver's call fails with the actor's death (``RoleFailedError.died``): the phase is retried
  after the restarted actor got the last synced weights;
- the actor died and was restarted between two calls, so nothing failed: its rollout then reports an
  old ``weights_version``, which the driver checks before using the samples; it resyncs and regenerates.

The learner is not restarted (its params and optimizer state would be lost): its death stops the
run, and ``--resume`` continues from the last checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from driver.launch import RoleFailedError, Roles, call

RESTARTABLE = ("rollout", "actor_ref", "reward")
T = TypeVar("T")


def wait_restarted(roles: Roles, role: str, timeout_s: float = 300.0) -> None:
    """Block until every actor of ``role`` answers ``ready()`` again (Ray restarts it in the background)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            handles = roles.actors.get(role, [])
            call([f"{role}-{i}" for i in range(len(handles))], [h.ready.remote() for h in handles], "restart")
            return
        except RoleFailedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def resync(roles: Roles, role: str) -> None:
    """Give ``role``'s actors the last synced weights (no-op before the first sync, for reward, and for
    actor_ref without an actor copy: see ``Roles.weight_holders``)."""
    if roles.weights_ref is None:
        return
    handles = roles.weight_holders(role)
    refs = [h.load_weights.remote(roles.weights_ref, roles.weights_version) for h in handles]
    call([f"{role}-{i}" for i in range(len(handles))], refs, "resync after restart")


def with_recovery(fn: Callable[[], T], roles: Roles, attempts: int, on_recover: Callable[[str], None]) -> T:
    """Run ``fn``; when a restartable role's actor died, recover it and run ``fn`` again (at most
    ``attempts`` times). Any other failure, or the learner's death, propagates."""
    for attempt in range(attempts + 1):
        try:
            return fn()
        except RoleFailedError as exc:
            if not exc.died or exc.role not in RESTARTABLE or attempt == attempts:
                raise
            wait_restarted(roles, exc.role)
            resync(roles, exc.role)
            on_recover(exc.role)
    raise AssertionError("unreachable")
