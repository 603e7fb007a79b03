"""Joining Ray with a bound: ``ray.init`` against an address where nothing answers retries forever.

Measured on this machine (Ray 2.x as pinned): ``ray.init(address="127.0.0.1:<port>")`` with nothing listening, and
with a listener that accepts connections and never answers, both logged "Failed to get cluster ID from GCS server"
every 30 s and were still waiting when killed after 200 s. So the driver first tries a TCP connection to an
explicit ``host:port`` (refused or unroutable: an error at once, naming the address), then runs ``ray.init`` with a
watchdog: past ``trainer.ray_init_timeout_s`` it prints what it waited for and ends the process (exit 1). The
watchdog is a timer thread, not ``ray.init`` moved to a thread: a local cluster started from a thread other than
the main one lost its GCS about a minute after that thread ended (seen once here; not looked into further).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from typing import Any

PROBE_TIMEOUT_S = 5.0
EXIT_STALLED = 1


class RayConnectError(RuntimeError):
    """Nothing accepts connections at the Ray address the driver was given."""


def unreachable(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why ``address`` (``host:port``) cannot be joined, or None when it accepts a TCP connection or is not a plain
    ``host:port`` (``local``, ``auto``, ``ray://...``: Ray resolves those itself).

    >>> unreachable("local") is None, unreachable("ray://head:10001") is None
    (True, True)
    """
    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isdigit():
        return None
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return None
    except OSError as exc:
        return f"nothing accepts connections at {address} ({exc}); is the head running there?"


def connect_ray(address: str, timeout_s: float | None, **init_kwargs: Any) -> Any:
    """``ray.init(address=address, **init_kwargs)``; :class:`RayConnectError` at once when :func:`unreachable`
    says why, and exit 1 with a message naming the address when ``ray.init`` has not returned after ``timeout_s``
    (None: no bound)."""
    import ray

    problem = unreachable(address)
    if problem is not None:
        raise RayConnectError(f"RAY_ADDRESS / the cluster file: {problem}")
    watchdog = None
    if timeout_s is not None:
        watchdog = threading.Timer(timeout_s, _give_up, (address, timeout_s))
        watchdog.daemon = True
        watchdog.start()
    try:
        return ray.init(address=address, **init_kwargs)
    finally:
        if watchdog is not None:
            watchdog.cancel()


def _give_up(address: str, timeout_s: float) -> None:
    if address == "local":
        what = "start a local cluster (its processes did not come up)"
    else:
        what = f"join the cluster at {address} (its GCS accepts connections but does not answer: a stopped head?)"
    print(
        f"error: ray.init did not {what} within trainer.ray_init_timeout_s={timeout_s:g} s",
        file=sys.stderr,
        flush=True,
    )
    os._exit(EXIT_STALLED)
