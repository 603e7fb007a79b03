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
- Such a restart fails no call, so only the actor's own report shows it: after each step the driver asks every
  actor who answers (:class:`RestartLedger`: a restarted actor is a new process with a new incarnation), counts the
  restarts it did not make (``recovery/ray_restarts``) and takes the restarted actors' new pids and nodes into its
  record (the run's ``roles`` event, the pid :func:`kill_hung` signals).

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
    In a fault-injection campaign (``benchmarks/faults/chaos.py``) a stopped rollout given ``ray.kill`` alone was once
    not restarted within 60 s (the cause was not found; the same fault replayed recovered in 10 s); a SIGKILL ends a
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


READ_WAIT_S = 1.0  # how long a reading waits for the reports (an idle actor answers in milliseconds)


@dataclass
class RestartLedger:
    """The restarts of each actor that Ray made and Relay did not (:meth:`driver.role_group.Roles.recover`), read
    from the actors' own reports: each ``ready()`` answers with its process's ``incarnation``
    (:func:`relay.process_identity.process_identity`), and an actor Ray restarted answers with a new one.

    Worked example: ``reward-0`` is killed between steps 3 and 4; Ray restarts it and queues step 4's grading until
    it is back, so no call fails and Relay restarts nothing. After step 4, :meth:`notice` reads ``reward-0``'s report:
    a new incarnation that no restart of Relay's brought up, so 1 restart Ray made alone, and its new pid and node
    replace the old in ``ready_info``. Had a hung ``reward-0`` been killed by Relay instead, :meth:`relay_restarted`
    would have recorded the new incarnation, and :meth:`notice` would count 0. While Relay restarts an actor (the
    pipeline's collect thread may, as the driver reads) :meth:`relay_restarting` holds its reports back, so a new
    incarnation is never judged before Relay has said whether it brought it up; a lock keeps the threads' updates
    whole.

    A reading does not wait on a busy actor: each report is asked for once and read at the first reading it has
    answered by (a rollout generating the next step's batch answers after it), so a restart is counted in the row of
    the step its report arrives in. A report that fails (the actor died under it) is asked for again at the next
    reading, from the restarted actor; an actor gone for good fails the next call to it, which names it. Two restarts
    between two answered reports count as one.
    """

    seen: dict[str, str] = field(default_factory=dict)  # each actor's incarnation at its last report
    by_relay: set[str] = field(default_factory=set)  # the incarnations Relay's own restarts brought up
    restarting: set[str] = field(default_factory=set)  # the actors Relay is restarting now
    asked: dict[str, ray.ObjectRef] = field(default_factory=dict, repr=False)  # reports asked for, not yet read
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def relay_restarting(self, name: str) -> None:
        with self.lock:
            self.restarting.add(name)

    def relay_restarted(self, name: str, incarnation: str | None) -> None:
        with self.lock:
            self.restarting.discard(name)
            if incarnation:
                self.by_relay.add(incarnation)

    def notice(self, handles: dict[str, ActorHandle], ready_info: dict[str, dict], wait_s: float = READ_WAIT_S) -> int:
        """The restarts of ``handles`` (by actor name) that Ray made and Relay did not, in the reports that answered
        within ``wait_s``; each restarted actor's pid, node id and incarnation are written into ``ready_info``."""
        for name, handle in handles.items():
            if name not in self.asked:
                self.asked[name] = handle.ready.remote()
        names = list(self.asked)
        answered, _ = ray.wait([self.asked[n] for n in names], num_returns=len(names), timeout=wait_s)
        done = {ref.hex() for ref in answered}
        restarts = 0
        for name in names:
            if self.asked[name].hex() not in done:
                continue  # busy: read at a later reading
            ref = self.asked.pop(name)
            try:
                report = ray.get(ref)
            except ray.exceptions.RayActorError:
                continue  # it died under the report: asked again, of its restarted process, next time
            with self.lock:
                restarts += self._read(name, report, ready_info)
        return restarts

    def _read(self, name: str, report: dict, ready_info: dict[str, dict]) -> int:
        """1 when ``report`` comes from a process of ``name`` that neither the last report nor Relay's restarts
        account for, else 0; ``ready_info`` takes a new process's pid, node and incarnation."""
        if name in self.restarting:
            return 0  # Relay is restarting it: read again once Relay has recorded what it brought up
        incarnation = report["incarnation"]
        before = self.seen.get(name, ready_info.get(name, {}).get("incarnation"))
        self.seen[name] = incarnation
        brought_up_by_relay = incarnation in self.by_relay
        self.by_relay.discard(incarnation)
        if incarnation == before:
            return 0
        ready_info.setdefault(name, {}).update(pid=report["pid"], node_id=report["node_id"], incarnation=incarnation)
        return 0 if brought_up_by_relay else 1
