"""Where a run's library output goes: one log file per role and one for the driver (the quiet terminal).

By default (``trainer.py`` without ``--verbose``) each role's process writes everything it prints, its
libraries' logging (vLLM, transformers, JAX, math-verify, its grader processes) included, to
``outputs/<run>/logs/<actor>.log`` (``rollout-0.log``, ``learner-0.log``, …), and the driver's libraries log to
``logs/driver.log``; the terminal keeps the header, the progress bar, the step table, the warnings the user
must act on and the errors (with the tail of the failed role's log). ``--verbose`` or ``RELAY_LOG_LEVEL=verbose``
keeps today's behaviour: everything on the terminal, nothing redirected.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

LOGS_DIR = "logs"
DRIVER_LOG = "driver.log"
ROLE_LOG_ENV = "RELAY_ROLE_LOG"  # set in a role's runtime_env: the file its process writes to
VERBOSE_LEVELS = ("verbose", "debug", "info")
# Loggers of the libraries the driver imports; their records go to driver.log in the quiet mode.
LIBRARY_LOGGERS = ("ray", "transformers", "vllm", "jax", "absl", "math_verify", "datasets", "urllib3", "filelock")


def quiet_requested(verbose_flag: bool, environ: Mapping[str, str] | None = None) -> bool:
    """Quiet unless ``--verbose`` or ``RELAY_LOG_LEVEL`` is one of ``verbose``/``debug``/``info``.

    >>> quiet_requested(False, {}), quiet_requested(True, {}), quiet_requested(False, {"RELAY_LOG_LEVEL": "INFO"})
    (True, False, False)
    """
    environ = os.environ if environ is None else environ
    return not verbose_flag and environ.get("RELAY_LOG_LEVEL", "").lower() not in VERBOSE_LEVELS


def progress_bar_wanted(stream: Any = None) -> bool:
    """A carriage-return progress bar only on a terminal: in ``ray job logs``, the dashboard's job log or a
    redirected file its updates run into the step rows (there is one plain row per step instead).

    >>> import io
    >>> progress_bar_wanted(io.StringIO())
    False
    """
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except ValueError:  # a closed stream
        return False


def role_log_path(run_dir: Path, actor: str) -> Path:
    """``run_dir/logs/<actor>.log``, e.g. ``outputs/r/logs/rollout-0.log``."""
    return Path(run_dir) / LOGS_DIR / f"{actor}.log"


def redirect_process_output(path: str | Path) -> None:
    """Send this process's file descriptors 1 and 2 (and so ``sys.stdout``/``sys.stderr``, every logging
    handler on them, and every child process started later) to ``path``, appended (a restarted role continues
    its file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    finally:
        os.close(fd)


def apply_role_log(environ: Mapping[str, str] | None = None) -> str | None:
    """In a role's process: redirect its output to ``RELAY_ROLE_LOG`` when set; returns the path or None."""
    environ = os.environ if environ is None else environ
    path = environ.get(ROLE_LOG_ENV)
    if path:
        redirect_process_output(path)
    return path or None


def route_library_logs(path: Path, names: tuple[str, ...] = LIBRARY_LOGGERS) -> logging.Handler:
    """In the driver: the named libraries' log records (all levels they emit) and Python warnings go to ``path``
    instead of the terminal. Returns the file handler (remove it with :func:`unroute_library_logs`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    for name in (*names, "py.warnings"):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.propagate = False
        for other in list(logger.handlers):  # the libraries' own stream handlers (vLLM, Ray)
            if other is not handler and isinstance(other, logging.StreamHandler) and _on_terminal(other):
                logger.removeHandler(other)
    logging.captureWarnings(True)
    return handler


def unroute_library_logs(handler: logging.Handler, names: tuple[str, ...] = LIBRARY_LOGGERS) -> None:
    for name in (*names, "py.warnings"):
        logging.getLogger(name).removeHandler(handler)
    logging.captureWarnings(False)
    handler.close()


def tail(path: Path, lines: int = 30) -> list[str]:
    """The last ``lines`` lines of a text file (no trailing newlines), [] when it does not exist.

    Reads at most the last 256 KiB, so a long log costs no more than a short one.
    """
    path = Path(path)
    if not path.is_file():
        return []
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - 256 * 1024))
        data = f.read()
    return data.decode("utf-8", errors="replace").splitlines()[-lines:]


def _on_terminal(handler: logging.StreamHandler) -> bool:
    stream = getattr(handler, "stream", None)
    return stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)
