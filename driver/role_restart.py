"""How a role group survives an actor that dies or hangs mid-run: the kill of a hung actor and the bounded wait
for Ray's restart, called by :meth:`driver.role_group.Roles.recover`.

- A call whose actor died (``RoleFailedError.died``) or hung (no answer within ``trainer.role_call_timeout_s``: it is
  killed first; a tools actor that dies or hangs under a rollout's tool calls fails the rollout's call with a
  ``RoleFailedError`` naming that tools actor, :mod:`roles.role_call`) waits for Ray to restart the actor
  (``trainer.role_restart_timeout_s``), gives it the last synced weights, and the group sends the same call again,
  at most ``trainer.role_restarts`` times (``recovery/restarts``).
- An actor that died and was restarted between two calls answers from its initial weights: the rows report an old
  ``weights_version``, so the group resyncs and asks again (``recovery/stale_rollouts``,
  ``recovery/stale_actor_copies``; :meth:`driver.role_group.RoleGroup.current_rows`).

The learner is not restarted (its params and optimizer state would be lost): its death stops the run, and
``--resume`` continues from the last checkpoint.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

import ray
from ray.actor import ActorHandle

from roles.role_call import RoleFailedError, call


def kill_hung(handle: ActorHandle, ready_info: dict) -> None:
    """End a hung actor's process so that Ray restarts it (the restart counts against its max_restarts):
    ``ray.kill``, and on the driver's own node also SIGKILL to the pid it reported in ``ready()`` (``ready_info``).
    In a fault-injection campaign (``benchmarks/chaos.py``) a stopped rollout given ``ray.kill`` alone was once not
    restarted within 60 s (the cause was not found; the same fault replayed recovered in 10 s); a SIGKILL ends a
    stopped process for certain, where the driver can send one."""
    ray.kill(handle, no_restart=False)
    if ready_info.get("pid") and ready_info.get("node_id") == ray.get_runtime_context().get_node_id():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(int(ready_info["pid"]), signal.SIGKILL)


def wait_restarted(handles: list[ActorHandle], names: list[str], timeout_s: float) -> list[dict]:
    """Block until every actor answers ``ready()`` again (Ray restarts it in the background, once a node has room
    for its bundle) and return what each reported; after ``timeout_s`` a :class:`RoleFailedError` saying so. A call
    to an actor Ray is still restarting waits, so the wait is bounded here, not by the call."""
    deadline = time.monotonic() + timeout_s
    while True:
        refs = [h.ready.remote() for h in handles]
        _, pending = ray.wait(refs, num_returns=len(refs), timeout=max(0.0, deadline - time.monotonic()))
        if pending:
            waiting = names[refs.index(pending[0])]
            raise RoleFailedError(
                f"role '{waiting}' was not restarted within trainer.role_restart_timeout_s={timeout_s:g} s "
                "(no node has room for its bundle, or its node is gone)",
                waiting,
                died=True,
            )
        try:
            return call(names, refs, "restart")
        except RoleFailedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)
