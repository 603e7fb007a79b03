"""The script the Python tool's child process runs before the model's code (``python_sandbox`` starts it).

It runs as ``python -I -S -B -X utf8 sandbox_prelude.py CONFIG_JSON`` and uses only the standard library: the
child cannot import ``relay``. In order, it

1. reads the model's code (from a file the child's unprivileged user cannot read) and imports the modules
   it is told to preload (where the interpreter's files are unreadable to that user, those are all the
   code can import);
2. sets the resource limits (``RLIMIT_CORE``, ``RLIMIT_FSIZE``, ``RLIMIT_NOFILE``, ``RLIMIT_NPROC``,
   ``RLIMIT_AS``, ``RLIMIT_CPU``) and ignores ``SIGXFSZ``, so a write past the file-size limit fails with an
   ``OSError`` instead of killing the process;
3. when started as root, drops to the sandbox user and group, and checks that root cannot be regained;
4. caps what ``sys.stdout`` / ``sys.stderr`` pass on (further writes are dropped, not errors);
5. installs an audit hook (``sys.addaudithook``, which cannot be removed) refusing process creation and
   signals, sockets, ctypes, gc introspection, reading files outside the working directory and the
   interpreter's own library directories, and changing files outside the working directory;
6. runs the code as ``__main__``. An uncaught exception ends the process with status 1 after one line on
   stderr: ``<Type>: <message> (line <n>)``.

A failed step 2 or 3 ends the process with ``SETUP_FAILED_EXIT`` before any of the model's code has run.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import resource
import signal
import sys
import traceback
import types
from collections.abc import Callable, Iterable
from typing import Any, TextIO

CODE_NAME = "<python>"  # the file name the model's code compiles under (tracebacks, line numbers)
SETUP_FAILED_EXIT = 97
SETUP_FAILED_PREFIX = "sandbox setup failed: "

BLOCKED_EVENTS = frozenset(
    {
        "os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty", "subprocess.Popen",
        "os.kill", "os.killpg", "signal.pthread_kill", "resource.prlimit",
        "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    }
)  # fmt: skip
BLOCKED_PREFIXES = ("socket.", "ctypes.")
READ_EVENTS = {"os.listdir": (0,), "os.scandir": (0,)}  # event -> positions of its path arguments
WRITE_EVENTS = {
    "os.mkdir": (0,), "os.remove": (0,), "os.rmdir": (0,), "os.rename": (0, 1), "os.link": (0, 1),
    "os.symlink": (1,), "os.truncate": (0,), "os.chmod": (0,), "os.chown": (0,), "os.utime": (0,),
    "os.setxattr": (0,), "os.removexattr": (0,), "shutil.rmtree": (0,),
}  # fmt: skip
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _inside(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def make_audit_hook(work: str, read_roots: tuple[str, ...]) -> Callable[[str, tuple[Any, ...]], None]:
    """The hook: raises PermissionError for a refused event; paths are resolved (symlinks included) first.

    What it consults is bound here, in its closure, so rebinding this module's names or ``os.path.realpath``
    from the model's code changes nothing; monkeypatching what ``realpath`` itself calls still can (see the
    limits in ``python_sandbox``)."""
    blocked, prefixes, write_flags = BLOCKED_EVENTS, BLOCKED_PREFIXES, WRITE_FLAGS
    read_events, write_events = dict(READ_EVENTS), dict(WRITE_EVENTS)
    realpath, fsdecode, inside = os.path.realpath, os.fsdecode, _inside
    writable, readable = (work,), (work, *read_roots)

    def check(event: str, path: Any, roots: tuple[str, ...], action: str) -> None:
        if isinstance(path, int):  # an already-open descriptor: checked when it was opened
            return
        resolved = realpath(fsdecode(path if path is not None else "."))
        if not inside(resolved, roots):
            raise PermissionError(f"sandbox: {action} {resolved!r} is not allowed ({event})")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in blocked or event.startswith(prefixes):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "open":
            path, mode, flags = args
            writing = bool(mode and any(c in mode for c in "wax+")) or bool((flags or 0) & write_flags)
            check(event, path, writable if writing else readable, "writing" if writing else "reading")
        elif event in read_events:
            for i in read_events[event]:
                check(event, args[i], readable, "reading")
        elif event in write_events:
            for i in write_events[event]:
                check(event, args[i], writable, "changing")

    return hook


class CappedStream:
    """Passes the first ``limit`` characters written to ``stream`` on and drops the rest; anything else
    (``flush``, ``fileno``, ``buffer``, ...) goes to ``stream``."""

    def __init__(self, stream: TextIO, limit: int) -> None:
        self._stream = stream
        self._left = limit

    def write(self, text: str) -> int:
        if self._left > 0:
            self._stream.write(text[: self._left])
        self._left = max(0, self._left - len(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _set_limit(kind: int, soft: int, hard: int) -> None:
    """Set a limit, never above the current hard limit (which only root could raise)."""
    ceiling = resource.getrlimit(kind)[1]
    if ceiling != resource.RLIM_INFINITY:
        soft, hard = min(soft, ceiling), min(hard, ceiling)
    resource.setrlimit(kind, (soft, hard))


def apply_limits(cfg: dict[str, Any]) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    for kind, value in (
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_FSIZE, cfg["file_bytes"]),
        (resource.RLIMIT_NOFILE, cfg["open_files"]),
        (resource.RLIMIT_NPROC, cfg["processes"]),
        (resource.RLIMIT_AS, cfg["memory_bytes"]),
    ):
        _set_limit(kind, value, value)
    # SIGXCPU at the soft limit ends the process; SIGKILL one second later if it ignores SIGXCPU.
    _set_limit(resource.RLIMIT_CPU, cfg["cpu_seconds"], cfg["cpu_seconds"] + 1)


def drop_privileges(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)  # as root: real, effective and saved ids
    if (os.getuid(), os.geteuid(), os.getgid(), os.getegid()) != (uid, uid, gid, gid):
        raise RuntimeError(f"still running as uid {os.geteuid()} gid {os.getegid()}")
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise RuntimeError("root could be regained after dropping privileges")


def error_line(exc: BaseException) -> str:
    """``<Type>: <message> (line <n>)``, ``n`` the innermost line of the model's code involved."""
    line = exc.lineno if isinstance(exc, SyntaxError) and exc.filename == CODE_NAME else None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == CODE_NAME:
            line = lineno
    message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
    text = " ".join(f"{type(exc).__name__}: {message}".split()) if message else type(exc).__name__
    return f"{text} (line {line})" if line else text


def _finish(status: int, message: str | None = None) -> None:
    """Flush the capped streams, write ``message`` as the last line of stderr (past the cap), exit."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    if message:
        sys.__stderr__.write(f"\n{message}\n")
        sys.__stderr__.flush()
    sys.exit(status)


def run_code(code: str) -> None:
    """Run ``code`` as a fresh ``__main__`` module (``import __main__`` finds the model's module, not this one)."""
    module = types.ModuleType("__main__")
    module.__builtins__ = builtins
    sys.modules["__main__"] = module
    try:
        exec(compile(code, CODE_NAME, "exec"), module.__dict__)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            _finish(exc.code or 0)
        _finish(1, " ".join(str(exc.code).split()))
    except BaseException as exc:  # whatever the code raised is the model's error message
        _finish(1, error_line(exc))
    _finish(0)


def main(argv: list[str]) -> None:
    cfg = json.loads(argv[1])
    with open(cfg["code_path"], encoding="utf-8") as file:
        code = file.read()
    for name in cfg["preload"]:
        with contextlib.suppress(ImportError):
            __import__(name)
    sys.path.extend(cfg["site_paths"])
    try:
        apply_limits(cfg)
        if cfg["uid"] is not None:
            drop_privileges(cfg["uid"], cfg["gid"])
    except (OSError, RuntimeError, ValueError) as exc:
        sys.stderr.write(f"{SETUP_FAILED_PREFIX}{type(exc).__name__}: {exc}\n")
        sys.stderr.flush()
        os._exit(SETUP_FAILED_EXIT)
    sys.stdout = CappedStream(sys.stdout, cfg["output_chars"])
    sys.stderr = CappedStream(sys.stderr, cfg["output_chars"])
    if cfg["audit_hook"]:
        sys.addaudithook(make_audit_hook(cfg["work"], tuple(cfg["read_roots"])))
    run_code(code)


if __name__ == "__main__":
    main(sys.argv)
