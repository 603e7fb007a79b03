"""The Python tool: the model's code runs in a fresh, limited child process, one per call.

What each call gets:

- a new interpreter (``sys.executable -I -S -B -X utf8``: no environment variables of the ``PYTHON*`` kind,
  no user site, no ``.pth`` code), started by ``sandbox_prelude.py``, which limits and then runs the code;
- a fresh temporary working directory (also ``HOME`` and ``TMPDIR``), removed after the call;
- a minimal environment (``PATH``, locale, ``HOME``, ``TMPDIR``, one thread for BLAS/OpenMP): none of the
  parent's variables (tokens, keys) reach the code;
- stdin from ``/dev/null``; stdout and stderr to anonymous temporary files the parent reads back at most a
  few times ``max_output_chars`` from, so a huge print costs the parent nothing;
- its own session and process group, killed as a whole (``SIGKILL``) when the call ends or times out;
- limits: wall clock ``timeout_s`` (``ToolTimeout``), ``RLIMIT_CPU`` ``cpu_seconds`` rounded up to whole
  seconds (``ToolTimeout``), ``RLIMIT_AS`` ``memory_mb`` (a ``MemoryError`` in the code), ``RLIMIT_FSIZE``
  ``FILE_SIZE_LIMIT``, ``RLIMIT_NOFILE`` ``OPEN_FILES_LIMIT``, ``RLIMIT_CORE`` 0, ``RLIMIT_NPROC``
  ``PROCESS_LIMIT`` (0: no new processes, and no threads either);
- when the parent runs as root: the code runs as ``SANDBOX_UID``/``SANDBOX_GID`` (nobody), so file
  permissions apply to it and ``RLIMIT_NPROC`` binds (the kernel exempts root from it); where the
  interpreter's own files are unreadable to that user (an interpreter under ``/root``), a fixed set of
  standard modules (``PRELOAD_MODULES``) is imported before the switch and other imports fail;
- a network namespace of its own (the ``unshare`` tool: ``--net`` as root, with ``--map-root-user``
  otherwise) holding only a loopback device that is down: no network at all, localhost included;
- an audit hook (see ``sandbox_prelude``) refusing process creation, signals, sockets, ctypes, gc
  introspection, reading files outside the working directory and the interpreter's library directories,
  and changing files outside the working directory.

The child is started without ``preexec_fn``, which can deadlock in a threaded process such as the tools
worker: the prelude, still root, sets the limits and drops to the sandbox user itself, before any of the
model's code runs. ``sandbox_protections()`` says which of these are active on this machine; a protection
that cannot be set up where it was expected fails the call instead of running the code without it.

What this sandbox does NOT protect against (it is a set of process limits, not a security boundary like
gVisor, nsjail, Firecracker or a VM; run untrusted code from the outside world in one of those):

- kernel exploits: the code shares the host kernel, and the system calls it may make are not filtered
  (no seccomp);
- native code: the audit hook sees only what the interpreter reports; code that reaches native code (a
  C extension on the path, a CPython memory-safety bug) is bound only by the uid, the rlimits and the
  network namespace. Without a network namespace (``unshare`` missing or refused), native code has the
  host's network;
- Python code set on subverting the hook: it is Python, and monkeypatching what it calls (``posixpath``
  internals, ``builtins``) can change its answers; it is a second line that stops accidents and naive
  attempts, the uid and the limits are the first;
- reading what nobody may read: world-readable files (``/etc/passwd``) are refused only by the hook, and
  ``os.stat``/``os.path.exists`` are not audited, so the existence of paths leaks;
- the host's capacity: each call is bounded, but ``concurrency`` calls at once add up (CPU, memory, disk);
  the working directory's disk use is bounded per file (``RLIMIT_FSIZE``), not in total;
- calls that share the sandbox user: they run under the same uid, so native code in one can signal or
  read another's working directory while both run; without root there is no separate uid at all;
- time measurements and side channels (timing, ``/proc``), and resource use by the interpreter start-up
  before the limits apply.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from relay.tools import ToolError, ToolLimits, ToolTimeout
from relay.tools.sandbox_prelude import SETUP_FAILED_EXIT, SETUP_FAILED_PREFIX

SANDBOX_UID = 65534  # nobody
SANDBOX_GID = 65534  # nogroup
FILE_SIZE_LIMIT = 8 << 20  # bytes per file the code writes (its output files included)
OPEN_FILES_LIMIT = 64
PROCESS_LIMIT = 0  # RLIMIT_NPROC: no fork, no threads
NO_OUTPUT = "(no output)"
PRELUDE = Path(__file__).with_name("sandbox_prelude.py")
PRELOAD_MODULES = (  # "socket", "threading": libraries import them; using them is refused at run time
    "array", "bisect", "cmath", "collections", "copy", "datetime", "decimal", "encodings.idna", "fractions",
    "functools", "heapq", "itertools", "json", "math", "numbers", "operator", "random", "re", "socket",
    "statistics", "string", "threading", "typing",
)  # fmt: skip
DEVICE_FILES = ("/dev/null", "/dev/urandom", "/dev/random", "/dev/zero")


def _world_readable(directory: str) -> bool:
    """Whether any user may list ``directory`` and walk to it."""
    path = Path(directory).resolve()
    try:
        walkable = all(os.stat(d).st_mode & stat.S_IXOTH for d in (path, *path.parents))
        return walkable and bool(os.stat(path).st_mode & stat.S_IROTH)
    except OSError:
        return False


def _network_namespace_command() -> list[str]:
    """The command prefix that starts the child in a new network namespace, or [] where that fails here."""
    tool = shutil.which("unshare")
    if tool is None:
        return []
    prefix = [tool, "--net"] if os.geteuid() == 0 else [tool, "--net", "--map-root-user"]
    try:
        probe = subprocess.run([*prefix, "--", "true"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    return [*prefix, "--"] if probe.returncode == 0 else []


@functools.lru_cache(maxsize=1)
def _setup() -> dict[str, Any]:
    """What every call of this process uses: probed once (the network-namespace probe starts a process)."""
    root = os.geteuid() == 0
    stdlib = sysconfig.get_paths()
    libraries = sorted({os.path.realpath(stdlib[key]) for key in ("stdlib", "platstdlib", "purelib", "platlib")})
    return {
        "prefix": _network_namespace_command(),
        "uid": SANDBOX_UID if root else None,
        "gid": SANDBOX_GID if root else None,
        "preload": list(PRELOAD_MODULES) if root and not _world_readable(stdlib["stdlib"]) else [],
        "read_roots": [*libraries, *DEVICE_FILES],
        "site_paths": sorted({stdlib["purelib"], stdlib["platlib"]}),
    }


def sandbox_protections() -> dict[str, Any]:
    """Which protections the Python tool applies on this machine (the module docstring describes each)."""
    setup = _setup()
    return {
        "network_namespace": bool(setup["prefix"]),
        "sandbox_uid": setup["uid"],  # None: the code runs as this process's (non-root) user
        "process_limit": setup["uid"] is not None or os.geteuid() != 0,  # RLIMIT_NPROC binds non-root only
        "rlimits": ["RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_CORE"],
        "audit_hook": True,
        "preloaded_stdlib_only": bool(setup["preload"]),  # other imports fail: the stdlib is unreadable to it
    }


def _child_env(work: str) -> dict[str, str]:
    threads = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    return {"PATH": "/usr/bin:/bin", "HOME": work, "TMPDIR": work, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", **threads}


def _prelude_config(code_path: str, work: str, limits: ToolLimits, audit_hook: bool) -> dict[str, Any]:
    setup = _setup()
    return {
        "code_path": code_path,
        "work": work,
        "uid": setup["uid"],
        "gid": setup["gid"],
        "preload": setup["preload"],
        "site_paths": setup["site_paths"],
        "read_roots": setup["read_roots"],
        "cpu_seconds": _cpu_seconds(limits),
        "memory_bytes": limits.memory_mb << 20,
        "file_bytes": FILE_SIZE_LIMIT,
        "open_files": OPEN_FILES_LIMIT,
        "processes": PROCESS_LIMIT,
        "output_chars": limits.max_output_chars + 1,  # one more than shown: the parent sees that it was cut
        "audit_hook": audit_hook,
    }


def _cpu_seconds(limits: ToolLimits) -> int:
    return max(1, int(-(-limits.cpu_seconds // 1)))  # RLIMIT_CPU counts whole seconds: round up


def _wait_exit(pid: int, timeout_s: float) -> bool:
    """Whether process ``pid`` exited within ``timeout_s``. It is left unreaped, so its pid, and with it the
    id of its process group, cannot be reused before the group is killed."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # Linux < 5.3: poll instead
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
            time.sleep(0.005)
        return False
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        return bool(poller.poll(timeout_s * 1000))
    finally:
        os.close(pidfd)


def _execute(command: list[str], work: str, out: IO[bytes], err: IO[bytes], timeout_s: float) -> tuple[int, bool]:
    """Run ``command`` in its own session; ``(exit status, timed out)``. Its process group is killed afterwards
    whether or not it timed out, so nothing it started outlives the call."""
    proc = subprocess.Popen(
        command, cwd=work, env=_child_env(work), stdin=subprocess.DEVNULL, stdout=out, stderr=err,
        start_new_session=True, close_fds=True,
    )  # fmt: skip
    exited = False
    try:
        exited = _wait_exit(proc.pid, timeout_s)
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return proc.returncode, not exited


def _read_head(file: IO[bytes], chars: int) -> str:
    """At most about ``chars + 1`` characters from the start of ``file``: more when more was written, so a
    caller comparing the length with ``chars`` sees the cut."""
    file.seek(0)
    return file.read(4 * (chars + 1)).decode("utf-8", "replace")


def _last_line(file: IO[bytes]) -> str:
    """The last non-empty line of ``file``, from its last 4 KiB."""
    size = file.seek(0, os.SEEK_END)
    file.seek(max(0, size - 4096))
    lines = [line.strip() for line in file.read().decode("utf-8", "replace").splitlines()]
    return next((line for line in reversed(lines) if line), "")


def _outcome(status: int, timed_out: bool, out: IO[bytes], err: IO[bytes], limits: ToolLimits) -> str:
    """The text of an ok call, or the ToolError / ToolTimeout that the exit status means."""
    if timed_out:
        raise ToolTimeout(f"timed out after {limits.timeout_s:g} s (wall clock)")
    if status == -signal.SIGXCPU:
        raise ToolTimeout(f"CPU time limit of {_cpu_seconds(limits)} s exceeded")
    if status == 0:
        text = (_read_head(out, limits.max_output_chars) + _read_head(err, limits.max_output_chars)).rstrip()
        return text or NO_OUTPUT
    last = _last_line(err)
    if status == SETUP_FAILED_EXIT and last.startswith(SETUP_FAILED_PREFIX):
        raise RuntimeError(last)  # not the model's doing: run_tool logs it as an internal error
    if status < 0:
        name = signal.Signals(-status).name
        hint = " (the CPU hard limit or the out-of-memory killer)" if status == -signal.SIGKILL else ""
        raise ToolError(f"the program was killed by {name}{hint}")
    raise ToolError(last or f"the program exited with status {status}")


def _remove_tree(path: str) -> None:
    """Remove the call's directory, whatever the code left in it (deep trees, unreadable modes)."""
    try:
        shutil.rmtree(path)
    except (OSError, RecursionError):
        subprocess.run(["rm", "-rf", "--", path], capture_output=True, timeout=60, check=False)


def run_python(code: str, limits: ToolLimits, *, audit_hook: bool = True) -> str:
    """Run ``code`` in the sandbox; its stdout then stderr (``NO_OUTPUT`` when both are empty), trailing
    whitespace removed. ``ToolError``: the code raised (``<Type>: <message> (line <n>)``), exited non-zero or
    was killed; ``ToolTimeout``: the wall-clock or CPU limit. ``audit_hook=False`` leaves only the kernel's
    protections (tests use it to check those on their own)."""
    if len(code) > limits.max_input_chars:
        raise ToolError(f"code is {len(code)} characters; the limit is {limits.max_input_chars}")
    try:
        code.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError("the code is not valid text (it holds unpaired surrogates)") from exc
    setup = _setup()
    call_dir = tempfile.mkdtemp(prefix="relay-python-")
    try:
        os.chmod(call_dir, 0o711)  # the sandbox user may pass through to work/, not list or read the rest
        work = os.path.join(os.path.realpath(call_dir), "work")  # resolved: the audit hook compares real paths
        os.mkdir(work, 0o700)
        if setup["uid"] is not None:
            os.chown(work, setup["uid"], setup["gid"])
        code_path = os.path.join(call_dir, "main.py")  # 0600, read by the prelude before it drops root
        with open(os.open(code_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as f:
            f.write(code)
        config = json.dumps(_prelude_config(code_path, work, limits, audit_hook))
        command = [*setup["prefix"], sys.executable, "-I", "-S", "-B", "-X", "utf8", str(PRELUDE), config]
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            status, timed_out = _execute(command, work, out, err, limits.timeout_s)
            return _outcome(status, timed_out, out, err, limits)
    finally:
        _remove_tree(call_dir)
