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
- Such a restart fails no call, so only Ray's actor table shows it: after each step the driver reads the table
  (:class:`RestartLedger`), counts the restarts it did not make (``recovery/ray_restarts``) and takes the restarted
  actors' new pids and nodes into its record (the run's ``roles`` event, the pid :func:`kill_hung` signals).

The learner is not restarted (its params and optimizer state would be lost): its death stops the run, and
``--resume`` continues from the last checkpoint.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass, field

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


def actor_table() -> dict[str, dict]:
    """This job's actors as Ray's actor table (GCS) holds them, by actor id in hex: ``NumRestarts``, ``State``,
    ``Pid``, ``Address["NodeID"]``. One GCS request (1.3 ms measured on a one-node head). Read through
    ``ray._private.state.actors`` (ray 2.60.0, ``ray/_private/state.py``: ``GlobalState.actor_table`` and
    ``_gen_actor_info``, which name these fields): the public state API (``ray.util.state``) asks the dashboard,
    which a cluster may run without. Ray is pinned in the lock; ``tests/driver/test_recovery.py`` reads it."""
    from ray._private import state

    return state.actors(job_id=ray.JobID.from_hex(ray.get_runtime_context().get_job_id()))


@dataclass
class RestartLedger:
    """Ray's restarts of each actor against those Relay made (:meth:`driver.role_group.Roles.recover`).

    Worked example: ``reward-0`` is killed between steps 3 and 4; Ray restarts it (its ``NumRestarts`` 0 → 1) and
    queues step 4's grading until it is back, so no call fails and Relay restarts nothing. After step 4,
    :meth:`notice` reads 1 restart, 0 seen before, 0 made by Relay: 1 restart Ray made alone, and ``reward-0``'s
    new pid and node replace the old in ``ready_info``. Had a hung ``reward-0`` been killed by Relay instead, its
    :meth:`relay_restarted` would cancel that 1 and :meth:`notice` would count 0. A Relay restart that the table
    does not show yet (the pipeline's collect thread restarting an actor while the driver reads) stays owed and
    cancels the restart when the table shows it; a lock keeps the two threads' updates whole."""

    seen: dict[str, int] = field(default_factory=dict)  # each actor's NumRestarts when last read
    by_relay: dict[str, int] = field(default_factory=dict)  # Relay's restarts of each actor the table has not shown
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def relay_restarted(self, name: str) -> None:
        with self.lock:
            self.by_relay[name] = self.by_relay.get(name, 0) + 1

    def notice(self, handles: dict[str, ActorHandle], ready_info: dict[str, dict]) -> int:
        """The restarts of ``handles`` (by actor name) that Ray made since the last reading and Relay did not;
        each live restarted actor's pid and node id are written into ``ready_info``."""
        with self.lock:
            table = actor_table()
            return sum(self._read(name, table.get(h._actor_id.hex()), ready_info) for name, h in handles.items())

    def _read(self, name: str, entry: dict | None, ready_info: dict[str, dict]) -> int:
        """One actor's restarts no one accounted for, from its table ``entry`` (None: not in the table)."""
        if entry is None:
            return 0
        restarts = int(entry["NumRestarts"])
        new, owed = restarts - self.seen.get(name, 0), self.by_relay.pop(name, 0)
        if owed > new:  # Relay restarted it and the table does not show it yet
            self.by_relay[name] = owed - new
        self.seen[name] = restarts
        info = ready_info.setdefault(name, {})
        if entry["State"] == "ALIVE" and entry["Pid"] and entry["Pid"] != info.get("pid"):
            info.update(pid=int(entry["Pid"]), node_id=entry["Address"]["NodeID"])
        return max(0, new - owed)
