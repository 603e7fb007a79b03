"""A deadline on each phase of a multi-process learner that waits on the other processes.

On several hosts the update, the weight export and the checkpoint save/load are collectives: every JAX process
must enter them, and a process whose peer died, stopped or took another branch waits in the collective
forever (gloo on CPU, NCCL on GPU have no deadline of their own there). :class:`PhaseWatchdog` bounds each such
phase by ``learner.collective_timeout_s``: a timer thread started when the phase begins and cancelled when it
ends. On expiry the main thread is still blocked inside the collective, where no Python exception can reach
it, so the timer writes one line naming the host and the phase to stderr (the role's log, whose tail the driver
prints when a role fails) and ends the process with :data:`EXIT_CODE` (``os._exit``, as ``faulthandler``'s
``exit=True`` does). The driver's pending call then fails with the actor's death and the run stops.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# The learner process's exit status when a phase outlives its deadline.
EXIT_CODE = 75


def expiry_message(process: int, processes: int, phase: str, timeout_s: float) -> str:
    """The line a learner host writes when ``phase`` did not finish within ``timeout_s`` seconds.

    >>> expiry_message(1, 2, "update", 600).startswith("learner host 1 of 2 (JAX process 1")
    True
    """
    return (
        f"learner host {process} of {processes} (JAX process {process} on {socket.gethostname()}): the {phase} did "
        f"not finish within learner.collective_timeout_s={timeout_s:g} s; another learner host is dead, stopped or "
        "out of step, and this one waits on it in a collective. Ending this process."
    )


def exit_with_message(message: str) -> None:
    """Write ``message`` to stderr and end the process at once with :data:`EXIT_CODE` (the main thread may be
    blocked in native code, so no exception or cleanup runs)."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    os._exit(EXIT_CODE)


class PhaseWatchdog:
    """Deadlines for one learner process (``process`` of ``processes``). ``timeout_s`` None, or a single process
    (nothing to wait on), turns them off. ``on_expire`` receives the message (default: :func:`exit_with_message`)."""

    def __init__(
        self,
        timeout_s: float | None,
        process: int,
        processes: int,
        on_expire: Callable[[str], None] = exit_with_message,
    ) -> None:
        if timeout_s is not None and not timeout_s > 0:
            raise ValueError(f"collective timeout {timeout_s}: must be > 0 seconds or None")
        self.timeout_s = timeout_s if processes > 1 else None
        self.process, self.processes = process, processes
        self.on_expire = on_expire

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Run the body under the deadline; on expiry :attr:`on_expire` gets :func:`expiry_message` for ``name``
        (from the timer thread, while the body still runs). The timer is cancelled when the body ends, even by
        an exception."""
        if self.timeout_s is None:
            yield
            return
        message = expiry_message(self.process, self.processes, name, self.timeout_s)
        timer = threading.Timer(self.timeout_s, self.on_expire, args=(message,))
        timer.name = f"learner-watchdog-{name}"
        timer.daemon = True  # never keeps a finished process alive
        timer.start()
        try:
            yield
        finally:
            timer.cancel()
