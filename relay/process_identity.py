"""What a process of a run says about itself: a role actor in ``ready()`` (the driver's record of who answers for a
role: the run's ``roles`` event, the pid a hung actor is killed by; and the restart ledger's evidence,
:class:`driver.role_restart.RestartLedger`), a fault point in its delivery record (:func:`relay.faults.record_sent`).

``incarnation`` is drawn once per process: an actor Ray restarted is a new process and answers with a new one, even
where a pid is reused or the actor moved to a node whose pids overlap. Ray's own
``get_runtime_context().was_current_actor_reconstructed`` says only whether an actor was ever restarted (a bool,
read from the GCS actor table underneath: ray 2.60.0, ``ray/runtime_context.py``), so it cannot tell a second
restart from the first.
"""

from __future__ import annotations

import os
import sys
import uuid
from typing import Any

INCARNATION = uuid.uuid4().hex  # this process's: a restarted actor draws a new one


def connected_ray() -> Any | None:
    """The ``ray`` module when this process has initialised it, else None; never imports or starts Ray."""
    ray = sys.modules.get("ray")
    return ray if ray is not None and ray.is_initialized() else None


def ray_node_id() -> str | None:
    """This process's Ray node id (None outside Ray)."""
    ray = connected_ray()
    return None if ray is None else ray.get_runtime_context().get_node_id()


def ray_actor_id() -> str | None:
    """The Ray actor this process runs (hex; the same across Ray's restarts of it), or None: outside Ray or not an
    actor."""
    ray = connected_ray()
    return None if ray is None else ray.get_runtime_context().get_actor_id()


def process_identity() -> dict[str, Any]:
    """``{"pid": ..., "node_id": ..., "incarnation": ..., "actor_id": ...}`` of the process answering."""
    return {"pid": os.getpid(), "node_id": ray_node_id(), "incarnation": INCARNATION, "actor_id": ray_actor_id()}
