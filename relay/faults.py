"""Fault points: named places in a training step where a fault-injection run makes one process fail on purpose.

A run is armed through the environment: ``RELAY_FAULT`` holds one fault as JSON, e.g.
``{"point": "rollout.generate", "step": 3, "action": "kill", "marker": "/tmp/chaos/fault-7.fired", "delay_s": 0.4}``.
Every process of the run (the driver and, through their environment, the role actors: :func:`roles.env.role_env_vars`)
reads it; when the code reaches :func:`fault_point` with that point at that step, the process, ``delay_s`` seconds
later (a moment inside the work that follows the point; kill, stop and term only) or, when it reaches its next fault
point first, there (the work was quicker than the drawn delay: the signal lands just after it, never past the
process's end),

- ``kill``: sends itself SIGKILL (a crash with no chance to clean up: an OOM kill, a lost machine);
- ``stop``: sends itself SIGSTOP (a hang: alive, holding its resources, answering nothing);
- ``term``: sends itself SIGTERM (a preempted VM or ``ray job stop`` asking the run to end: the driver stops after
  the step in flight with a checkpoint, :mod:`driver.stop_signal`);
- ``enospc``: raises ``OSError(ENOSPC)`` (the disk full under a write);
- ``short_write``: caps the size of any file the process writes at :data:`SHORT_WRITE_BYTES` (``RLIMIT_FSIZE``,
  with ``SIGXFSZ`` ignored so a write past it fails with ``EFBIG``): the next files it writes are really cut short
  on disk, as a quota or a full volume leaves them mid-write; the cap stays with the process, as a full disk would;
- ``kill_node``: sends SIGKILL to the raylet above the process (a role actor's node lost as a machine losing power
  would be: every worker on it exits with its raylet; on one machine, a raylet that ``ray start --address`` added);
- ``kill_gcs``: sends SIGKILL to the cluster's GCS server (the Ray head's control store lost: without GCS fault
  tolerance every raylet and driver gives up on it after ``gcs_rpc_server_reconnect_timeout_s``; arm it where the
  GCS runs on the same machine, the driver's points);
- ``stop_node``: sends SIGSTOP to that raylet (a machine that stops answering without dying: a paused VM, a kernel
  stall, a network partition; its workers keep running, but the GCS stops hearing from the node and, after its health
  check gives up, counts the node and every actor on it dead).

``RELAY_FAULT`` may also hold a list: a fault and the faults that follow it. A fault with ``after`` (another fault's
marker) fires only once that fault was delivered, so it lands inside the recovery the first one set off: e.g. a
rollout killed in ``rollout.generate`` at step 2, then again in ``rollout.load_weights`` while Relay gives its
restarted process the synced weights; or the driver killed between steps, then the learner killed in
``learner.load_checkpoint`` while ``--resume`` loads the checkpoint.

The fault fires once per run however often the point is reached again: the first process to get there creates
``marker`` (``O_EXCL``, atomic on one filesystem), so a restarted actor or a resumed driver passes the same point
unharmed; ``<marker>.sent`` says the signal was then sent or the error raised (:func:`sent_marker`). Without
``RELAY_FAULT`` a fault point is one dictionary lookup. The seeded campaigns that choose the faults are
``benchmarks/faults/chaos.py``; fault points exist in the product, not in a test double, so a fault found by chance
replays at the same place from its seed (the FreeBSD fail points and the ``fail`` crate for Rust work the same way).

Worked example: armed with ``{"point": "learner.update", "step": 2, "action": "kill", ...}``, the learner passes
``fault_point("learner.update", 0)`` and ``(…, 1)``, dies at ``(…, 2)``; the driver's recovery restarts it or the
run ends with the checkpoint to resume from, and on ``--resume`` the marker exists, so step 2 runs.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import threading
import time
from dataclasses import asdict, dataclass
from functools import cache

from relay.process_identity import connected_ray, ray_actor_id

FAULT_ENV = "RELAY_FAULT"
ACTIONS = ("kill", "stop", "term", "enospc", "short_write", "kill_node", "stop_node", "kill_gcs")
NODE_ACTIONS = ("kill_node", "stop_node")  # aimed at the raylet above the process, not the process
SHORT_WRITE_BYTES = 512  # what a file written under a short_write fault keeps at most
SIGNALS = {
    "kill": signal.SIGKILL,
    "stop": signal.SIGSTOP,
    "term": signal.SIGTERM,
    "kill_node": signal.SIGKILL,
    "stop_node": signal.SIGSTOP,
    "kill_gcs": signal.SIGKILL,
}


@dataclass(frozen=True)
class Fault:
    """One fault: where (``point``), when (``step``), what (``action``), and the file that says it fired."""

    point: str
    step: int
    action: str
    marker: str
    delay_s: float = 0.0
    campaign: str = ""  # which seeded campaign drew it, e.g. "seed 7, fault 3 of 50" (benchmarks/faults/chaos.py)
    after: str = ""  # the marker of the fault this one follows: armed once that one was delivered

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"{FAULT_ENV}: action {self.action!r} is not one of {ACTIONS}")

    def to_env(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_fields(cls, fields: dict) -> Fault:
        point, step, action, marker = fields["point"], fields["step"], fields["action"], fields["marker"]
        delay, campaign = float(fields.get("delay_s", 0.0)), str(fields.get("campaign", ""))
        return cls(str(point), int(step), str(action), str(marker), delay, campaign, str(fields.get("after", "")))

    @classmethod
    def from_env(cls, text: str) -> tuple[Fault, ...]:
        """The faults ``RELAY_FAULT`` holds: one JSON object, or a list of them."""
        try:
            fields = json.loads(text)
            return tuple(cls.from_fields(f) for f in (fields if isinstance(fields, list) else [fields]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"{FAULT_ENV}={text!r}: not a fault ({exc}); expected {{point, step, action, marker[, delay_s, after]}}"
                " or a list of them"
            ) from None


def faults_to_env(faults: tuple[Fault, ...]) -> str:
    """``RELAY_FAULT``'s value for a fault and the faults that follow it (:attr:`Fault.after`)."""
    if len(faults) == 1:
        return faults[0].to_env()
    return json.dumps([asdict(f) for f in faults], sort_keys=True)


@cache
def armed() -> tuple[Fault, ...]:
    """The faults this process is armed with (``RELAY_FAULT``; empty when it is not); read once per process."""
    text = os.environ.get(FAULT_ENV)
    return Fault.from_env(text) if text else ()


def claim(marker: str) -> bool:
    """Create ``marker`` if nobody has; True for the one caller that created it."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps({"pid": os.getpid(), "time": time.time()}))
    return True


_SEND_LOCK = threading.Lock()
_PENDING: dict[str, tuple[int, int]] = {}  # marker -> (target, signal): delayed signals of this process not yet sent


def fault_point(point: str, step: int) -> None:
    """Fail here if this process is armed with a fault at ``point`` and ``step`` that has not fired yet (a kill or
    stop with ``delay_s`` fires from a timer thread while the caller goes on, or at the process's next fault point
    if it gets there first)."""
    faults = armed()
    if not faults:
        return
    for marker in list(_PENDING):  # the work after a delayed fault's point ended before its delay: deliver it now
        send_pending(marker)
    fault = next((f for f in faults if f.point == point and f.step == step and _due(f) and claim(f.marker)), None)
    if fault is None:
        return
    if fault.action == "enospc":
        record_sent(fault.marker)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), f"fault point {point} at step {step}")
    if fault.action == "short_write":
        record_sent(fault.marker)  # before the cap: the marker's own write must not be cut
        cap_file_size(SHORT_WRITE_BYTES)
        return
    target = signal_target(fault.action)
    if fault.delay_s <= 0:
        send(fault.marker, target, SIGNALS[fault.action])
        return
    _PENDING[fault.marker] = (target, SIGNALS[fault.action])
    timer = threading.Timer(fault.delay_s, send_pending, (fault.marker,))
    timer.daemon = True
    timer.start()


def send_pending(marker: str) -> None:
    """Send the delayed signal of ``marker`` if it is still pending: once, from the timer or the next fault point."""
    with _SEND_LOCK:
        pending = _PENDING.pop(marker, None)
    if pending is not None:
        send(marker, *pending)


def signal_target(action: str) -> int:
    """The process a signalling action is aimed at: the raylet above this one, the GCS, or this process."""
    if action in NODE_ACTIONS:
        return raylet_pid(action)
    return gcs_pid() if action == "kill_gcs" else os.getpid()


def _due(fault: Fault) -> bool:
    """Whether ``fault`` may fire: it follows no fault, or the one it follows was delivered."""
    return not fault.after or os.path.exists(sent_marker(fault.after))


def cap_file_size(limit: int) -> None:
    """Files this process writes stop at ``limit`` bytes: a write past it fails with ``EFBIG`` (``SIGXFSZ``, which
    would end the process, is ignored where this thread may set signal handlers; elsewhere it ends the process,
    a crash mid-write)."""
    import contextlib
    import resource

    with contextlib.suppress(ValueError):  # not the main thread: SIGXFSZ keeps its default action
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))


def sent_marker(marker: str) -> str:
    """The file that says the fault was delivered (the signal sent, the error raised), beside ``marker``, which only
    says that the point was reached: a delayed signal is never sent when its process ends first."""
    return f"{marker}.sent"


def record_sent(marker: str, target: int | None = None) -> None:
    """Write ``<marker>.sent``: the sending process's pid and Ray actor id (None for the driver), the signal's target
    pid (None for an error raised or a file-size cap) and the time; a campaign checks the sender against the run's
    record of its roles (``benchmarks/faults/run_dir.py::delivery_problem``)."""
    sent = {"pid": os.getpid(), "actor_id": ray_actor_id(), "target": target, "time": time.time()}
    with open(sent_marker(marker), "w") as f:
        f.write(json.dumps(sent))


def send(marker: str, target: int, signum: int) -> None:
    """Record the delivery, then send ``signum`` to ``target`` (after a kill of this process nothing more runs)."""
    record_sent(marker, target)
    os.kill(target, signum)


def raylet_pid(action: str = "kill_node") -> int:
    """The pid of the raylet this process runs under (a Ray worker's ancestor named ``raylet``)."""
    import psutil

    for parent in psutil.Process().parents():
        if parent.name() == "raylet":
            return parent.pid
    raise RuntimeError(f"fault action {action}: no raylet above this process (arm it at a role actor's point)")


def gcs_pid() -> int:
    """The pid of this Ray cluster's GCS server on this machine: the ``gcs_server`` process whose command line names
    the port of the GCS address this process joined."""
    import psutil

    ray = connected_ray()  # never imported here: relay/ needs no Ray
    if ray is None:
        raise RuntimeError("fault action kill_gcs: this process is not connected to Ray (arm it at a driver's point)")
    port = ray.get_runtime_context().gcs_address.rsplit(":", 1)[1]
    for process in psutil.process_iter(["name", "cmdline"]):
        if process.info["name"] == "gcs_server" and f"--gcs_server_port={port}" in (process.info["cmdline"] or []):
            return process.pid
    raise RuntimeError(f"fault action kill_gcs: no gcs_server on this machine serves port {port}")
