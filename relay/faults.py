"""Fault points: named places in a training step where a fault-injection run makes one process fail on purpose.

A run is armed through the environment: ``RELAY_FAULT`` holds one fault as JSON, e.g.
``{"point": "rollout.generate", "step": 3, "action": "kill", "marker": "/tmp/chaos/fault-7.fired"}``. Every
process of the run (the driver and, through their environment, the role actors) reads it; when the code reaches
:func:`fault_point` with that point at that step, the process

- ``kill``: sends itself SIGKILL (a crash with no chance to clean up: an OOM kill, a lost machine);
- ``stop``: sends itself SIGSTOP (a hang: alive, holding its resources, answering nothing);
- ``enospc``: raises ``OSError(ENOSPC)`` (the disk full under a write).

The fault fires once per run however often the point is reached again: the first process to get there creates
``marker`` (``O_EXCL``, atomic on one filesystem), so a restarted actor or a resumed driver passes the same point
unharmed. Without ``RELAY_FAULT`` a fault point is one dictionary lookup. The seeded campaigns that choose the
faults are ``benchmarks/chaos.py``; fault points exist in the product, not in a test double, so a fault found by
chance replays at the same place from its seed (the FreeBSD fail points and the ``fail`` crate for Rust work the
same way).

Worked example: armed with ``{"point": "learner.update", "step": 2, "action": "kill", ...}``, the learner passes
``fault_point("learner.update", 0)`` and ``(…, 1)``, dies at ``(…, 2)``; the driver's recovery restarts it or the
run ends with the checkpoint to resume from, and on ``--resume`` the marker exists, so step 2 runs.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import time
from dataclasses import asdict, dataclass
from functools import cache

FAULT_ENV = "RELAY_FAULT"
ACTIONS = ("kill", "stop", "enospc")


@dataclass(frozen=True)
class Fault:
    """One fault: where (``point``), when (``step``), what (``action``), and the file that says it fired."""

    point: str
    step: int
    action: str
    marker: str

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"{FAULT_ENV}: action {self.action!r} is not one of {ACTIONS}")

    def to_env(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_env(cls, text: str) -> Fault:
        try:
            fields = json.loads(text)
            return cls(str(fields["point"]), int(fields["step"]), str(fields["action"]), str(fields["marker"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"{FAULT_ENV}={text!r}: not a fault ({exc}); expected {{point, step, action, marker}}"
            ) from None


@cache
def armed() -> Fault | None:
    """The fault this process is armed with (``RELAY_FAULT``), or None; read once per process."""
    text = os.environ.get(FAULT_ENV)
    return Fault.from_env(text) if text else None


def claim(marker: str) -> bool:
    """Create ``marker`` if nobody has; True for the one caller that created it."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps({"pid": os.getpid(), "time": time.time()}))
    return True


def fault_point(point: str, step: int) -> None:
    """Fail here if this process is armed with a fault at ``point`` and ``step`` that has not fired yet."""
    fault = armed()
    if fault is None or fault.point != point or fault.step != step or not claim(fault.marker):
        return
    if fault.action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif fault.action == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    else:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), f"fault point {point} at step {step}")
