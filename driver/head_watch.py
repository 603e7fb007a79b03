"""The Ray head watched from the driver: a lost GCS ends the run within seconds, saying why and how to go on.

Without it, measured on the tiny job with its GCS killed between steps 1 and 2 (a ``kill_gcs`` fault,
:mod:`relay.faults`; AMD EPYC, 2 cores): the learner's next call failed, the failure's report asked Ray for its nodes
(``ray.nodes()``, to name a lost one) and never got an answer, and 60 s later Ray's core worker ended the process
with exit 1 and its own line, "Failed to connect to GCS within 60 seconds. GCS may have been killed. ... The program
will terminate." (ray 2.60.0: ``gcs_rpc_server_reconnect_timeout_s``, 60 s by default): no ``error`` event, and
nothing on what the run had saved or how to continue. With it the same run ended 15 s after the loss, with the line
below and the newest checkpoint, and ``--resume`` on a head started again on the same address completed the run.

:class:`HeadWatch` runs a daemon thread that opens a TCP connection to the GCS's port every :data:`PROBE_S` seconds.
A killed GCS refuses at once; once every attempt has failed for a quarter of Ray's reconnect timeout (15 s by
default: a GCS with fault tolerance that restarts within it is waited for), the thread writes an ``error`` event
(``kind: head_lost``), prints ``error: the Ray head's GCS at ... stopped answering`` with the newest checkpoint and
the resume command, and ends the process with exit 1. It cannot hand the failure to the main thread: that thread is
inside a Ray call that will not return, and nothing the driver could still do (an emergency checkpoint through the
learner) works without the GCS. A GCS that stalls but still accepts connections is not seen here; Ray's own timeout
ends that run.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path

from driver.run_record import print_resume_hint
from relay.run.events import EventLog

PROBE_S = 1.0  # between two connection attempts
RECONNECT_ENV = "RAY_gcs_rpc_server_reconnect_timeout_s"  # Ray's own bound before a worker gives up on the GCS
RAY_RECONNECT_DEFAULT_S = 60.0  # ray 2.60.0's default for it


def lost_after_s(environ: dict[str, str] | None = None) -> float:
    """How long the GCS may refuse connections before the run ends: a quarter of Ray's reconnect timeout.

    >>> lost_after_s({}), lost_after_s({"RAY_gcs_rpc_server_reconnect_timeout_s": "600"})
    (15.0, 150.0)
    """
    env = os.environ if environ is None else environ
    return float(env.get(RECONNECT_ENV, RAY_RECONNECT_DEFAULT_S)) / 4


def gcs_answers(address: str, timeout_s: float = 2.0) -> bool:
    """Whether a TCP connection to ``address`` (``host:port``) is accepted."""
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
        return True
    except OSError:
        return False


class HeadWatch:
    """A context manager around the run: watches ``gcs_address`` (``None``: Ray's, read on entry) and ends the
    process when the GCS is lost (:meth:`lost`)."""

    def __init__(
        self, run_dir: Path, events: EventLog, gcs_address: str | None = None, lost_after: float | None = None
    ) -> None:
        self.run_dir, self.events, self.address = run_dir, events, gcs_address
        self.lost_after = lost_after_s() if lost_after is None else lost_after
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> HeadWatch:
        if self.address is None:
            import ray

            self.address = ray.get_runtime_context().gcs_address
        self._thread = threading.Thread(target=self._watch, name="relay-head-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()

    def _watch(self) -> None:
        refused_since: float | None = None
        while not self._done.wait(PROBE_S):
            if gcs_answers(str(self.address)):
                refused_since = None
                continue
            now = time.monotonic()
            refused_since = now if refused_since is None else refused_since
            if now - refused_since >= self.lost_after and not self._done.is_set():
                self.lost(now - refused_since)

    def lost(self, refused_s: float) -> None:
        """Record and say that the GCS is gone, then end the process (exit 1)."""
        message = (
            f"error: the Ray head's GCS at {self.address} stopped answering (connections refused for "
            f"{refused_s:.0f} s): the cluster's control store is gone, so no Ray call of this run can finish; "
            "a head started with `ray start --head` must be started again before the resume"
        )
        self.events.write("error", kind="head_lost", gcs_address=self.address, refused_s=round(refused_s, 1))
        print(message, file=sys.stderr)
        print_resume_hint(self.run_dir)
        sys.stderr.flush()
        os._exit(1)
