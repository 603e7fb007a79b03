"""The Python tool's sandbox: ordinary code works, and each hostile program is contained, quickly, with no
process left behind (checked after every test). Tests named ``..._without_the_hook`` switch the audit hook
off to check the kernel's layer (uid, rlimits, network namespace) on its own."""

from __future__ import annotations

import io
import os
import socket
import time
import tracemalloc

import psutil
import pytest

from relay.tools import ToolLimits
from relay.tools.python_sandbox import NO_OUTPUT, run_python, sandbox_protections
from relay.tools.registry import OUTPUT_CUT_MARKER, ToolCall, ToolResult, run_tool
from relay.tools.sandbox_prelude import BLOCKED_EVENTS, CappedStream, make_audit_hook
from tests.relay.tools.sandbox_processes import sandbox_processes

LIMITS = ToolLimits(timeout_s=3.0, cpu_seconds=1.0, memory_mb=128, max_output_chars=200)
PROTECTIONS = sandbox_protections()
needs_uid = pytest.mark.skipif(PROTECTIONS["sandbox_uid"] is None, reason="not root: no separate sandbox user")
needs_netns = pytest.mark.skipif(not PROTECTIONS["network_namespace"], reason="no network namespace here")
needs_nproc = pytest.mark.skipif(not PROTECTIONS["process_limit"], reason="RLIMIT_NPROC does not bind here")


def _python(code: str, limits: ToolLimits = LIMITS, audit_hook: bool = True) -> ToolResult:
    tool = {"python": lambda argument, lim: run_python(argument, lim, audit_hook=audit_hook)}
    return run_tool(ToolCall("python", code), limits, tool)


def _sandbox_processes(since: float) -> set[int]:
    """This process's descendants and the sandbox user's processes it ran (or orphaned since ``since``)."""
    own = {child.pid for child in psutil.Process().children(recursive=True)}
    uid = PROTECTIONS["sandbox_uid"]
    if uid is None:
        return own
    return own | sandbox_processes({os.getpid()}, since, uid)


@pytest.fixture(autouse=True)
def no_leftover_processes():
    since = time.time()
    before = _sandbox_processes(since)
    yield
    assert _sandbox_processes(since) - before == set()


def test_print() -> None:
    result = _python("print(2 + 2)")
    assert (result.text, result.status) == ("4", "ok")
    assert result.seconds < ToolLimits().timeout_s  # no limit reached (wall times on a busy machine vary)


def test_no_output_says_so() -> None:
    assert _python("x = 1").text == NO_OUTPUT


def test_stdlib_imports_work() -> None:
    code = "import math, fractions, itertools\nprint(math.comb(5, 2), fractions.Fraction(1, 3) * 3)"
    assert _python(code).text == "10 1"


def test_stderr_follows_stdout_when_the_code_succeeds() -> None:
    assert _python("import sys\nprint('out')\nprint('warn', file=sys.stderr)").text == "out\nwarn"


def test_exception_gives_its_last_line_and_line_number() -> None:
    result = _python("x = 1\ny = x / 0\nprint(y)")
    assert (result.text, result.status) == ("error: ZeroDivisionError: division by zero (line 2)", "error")


def test_syntax_error() -> None:
    assert _python("def f(:\n    pass").text == "error: SyntaxError: invalid syntax (line 1)"


def test_exit_status_and_message() -> None:
    assert _python("import sys\nsys.exit('giving up')").text == "error: giving up"
    assert _python("import sys\nsys.exit(3)").text == "error: the program exited with status 3"
    assert _python("import sys\nprint('fine')\nsys.exit(0)").text == "fine"


def test_files_in_the_working_directory_and_its_removal() -> None:
    code = "import os\nopen('a.txt', 'w').write('kept')\nprint(open('a.txt').read(), os.getcwd())"
    result = _python(code)
    assert result.status == "ok"
    text, cwd = result.text.split()
    assert text == "kept"
    assert not os.path.exists(cwd) and not os.path.exists(os.path.dirname(cwd))


def test_the_parent_environment_does_not_leak(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELAY_TEST_SECRET", "hunter2")
    result = _python("import os\nprint(os.environ.get('RELAY_TEST_SECRET'), sorted(os.environ))")
    assert result.status == "ok"
    assert "hunter2" not in result.text and result.text.startswith("None ")
    assert "RELAY_TEST_SECRET" not in result.text


@needs_uid
def test_the_code_runs_as_the_sandbox_user() -> None:
    assert _python("import os\nprint(os.getuid(), os.geteuid(), os.getgroups())").text == "65534 65534 []"


# 1. an infinite loop
def test_infinite_loop_hits_the_wall_clock() -> None:
    result = _python("while True:\n    pass", ToolLimits(timeout_s=0.5, cpu_seconds=5))
    assert (result.text, result.status) == ("error: timed out after 0.5 s (wall clock)", "timeout")
    assert result.seconds < 5  # ended by the wall clock, long before 5 CPU seconds could run


def test_infinite_loop_hits_the_cpu_limit() -> None:
    result = _python("while True:\n    pass", ToolLimits(timeout_s=8, cpu_seconds=1))
    assert (result.text, result.status) == ("error: CPU time limit of 1 s exceeded", "timeout")
    assert result.seconds < 8  # ended by the CPU limit, before the 8 s wall clock


def test_sleeping_past_the_wall_clock() -> None:
    result = _python("import time\ntime.sleep(30)", ToolLimits(timeout_s=0.5))
    assert result.status == "timeout" and result.seconds < 10  # the 0.5 s wall clock, not the 30 s sleep


# 2. a fork bomb, and other ways to start processes
def test_fork_bomb_is_refused() -> None:
    result = _python("import os\nwhile True:\n    os.fork()")
    assert (result.text, result.status) == ("error: PermissionError: sandbox: os.fork is not allowed (line 3)", "error")


@needs_nproc
def test_fork_bomb_is_contained_without_the_hook() -> None:
    result = _python("import os\nwhile True:\n    os.fork()", audit_hook=False)
    assert result.status == "error"
    assert result.text.startswith("error: BlockingIOError: [Errno 11] Resource temporarily unavailable")


@pytest.mark.parametrize(
    ("code", "event"),
    [
        ("import os\nos.system('echo hi')", "os.system"),
        ("import os\nos.execv('/bin/echo', ['echo'])", "os.exec"),
        ("import os\nos.posix_spawn('/bin/echo', ['echo'], {})", "os.posix_spawn"),
        ("import os\nos.kill(1, 9)", "os.kill"),
    ],
)
def test_process_creation_and_signals_are_refused(code: str, event: str) -> None:
    assert _python(code).text.startswith(f"error: PermissionError: sandbox: {event} is not allowed")


@needs_nproc
def test_threads_cannot_start() -> None:
    result = _python("import threading\nthreading.Thread(target=print).start()")
    assert result.text == "error: RuntimeError: can't start new thread (line 2)"


# 3. a huge allocation
def test_huge_allocation_is_a_memory_error() -> None:
    result = _python("x = bytearray(10**10)")
    assert (result.text, result.status) == ("error: MemoryError (line 1)", "error")


def test_growing_allocation_is_a_memory_error() -> None:
    result = _python("chunks = []\nwhile True:\n    chunks.append(bytearray(10**6))")
    assert (result.text, result.status) == ("error: MemoryError (line 3)", "error")


# 4. reading files outside the sandbox
def test_reading_etc_passwd_is_refused() -> None:
    result = _python("print(open('/etc/passwd').read())")
    assert result.text == "error: PermissionError: sandbox: reading '/etc/passwd' is not allowed (open) (line 1)"


def test_reading_a_file_outside_the_working_directory_is_refused(tmp_path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2")
    for code in (f"print(open({str(secret)!r}).read())", f"import os\nprint(os.listdir({str(tmp_path)!r}))"):
        result = _python(code)
        assert result.status == "error" and "is not allowed" in result.text and "hunter2" not in result.text


def test_a_symlink_out_of_the_working_directory_is_refused() -> None:
    result = _python("import os\nos.symlink('/etc/passwd', 'p')\nprint(open('p').read())")
    assert result.text.startswith("error: PermissionError: sandbox: reading '/etc/passwd' is not allowed")


def test_writing_outside_the_working_directory_is_refused(tmp_path) -> None:
    target = tmp_path / "planted.txt"
    result = _python(f"open({str(target)!r}, 'w').write('x')")
    assert result.status == "error" and "writing" in result.text and not target.exists()


@needs_uid
def test_file_permissions_hold_without_the_hook(tmp_path) -> None:
    secret = tmp_path / "secret.txt"  # under pytest's 0700 root-owned directory
    secret.write_text("hunter2")
    result = _python(f"print(open({str(secret)!r}).read())", audit_hook=False)
    assert result.text == f"error: PermissionError: [Errno 13] Permission denied: {str(secret)!r} (line 1)"
    assert _python("print(open('/etc/shadow').read())", audit_hook=False).status == "error"


# 5. sockets
@pytest.mark.parametrize(
    "code",
    [
        "import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=1)",
        "import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 0))",
        "import socket\nsocket.getaddrinfo('localhost', 80)",
    ],
)
def test_sockets_are_refused(code: str) -> None:
    result = _python(code)
    assert result.status == "error"
    assert result.text.startswith("error: PermissionError: sandbox: socket.")


@needs_netns
def test_no_network_without_the_hook() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:  # listening here, in the host's namespace
        port = server.getsockname()[1]
        result = _python(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)", audit_hook=False)
    assert result.text == "error: OSError: [Errno 101] Network is unreachable (line 2)"


# 6. a 10 MB output
def _python_with_peak(code: str) -> tuple[ToolResult, int]:
    """``_python(code)`` and the peak bytes this (parent) process allocated in Python meanwhile."""
    tracemalloc.start()
    try:
        result = _python(code)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, peak


def test_ten_megabytes_of_print_is_cut_and_costs_the_parent_little() -> None:
    result, peak = _python_with_peak("print('x' * 10_000_000)")
    assert result.status == "ok"
    assert result.text == "x" * 200 + "\n" + OUTPUT_CUT_MARKER.format(limit=200)
    assert peak < 1 << 20


def test_ten_megabytes_written_past_sys_stdout_are_cut_too() -> None:
    result, peak = _python_with_peak("import os\nos.write(1, b'y' * 10_000_000)")
    assert result.status == "ok" and result.text.startswith("y" * 200 + "\n[output cut")
    assert peak < 1 << 20


def test_long_code_is_refused() -> None:
    assert _python("#" * 5000).text == "error: input is 5000 characters; the limit is 2000"


def test_code_that_is_not_text_is_refused() -> None:
    assert _python("print('\ud800')").text == "error: the code is not valid text (it holds unpaired surrogates)"


# the audit hook on its own, called directly (installing it here would be for good)
def test_hook_refusals(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = str(tmp_path)
    hook = make_audit_hook(work, ("/usr/lib/python3",))
    monkeypatch.setattr("relay.tools.sandbox_prelude.BLOCKED_EVENTS", frozenset())  # bound at creation: no effect
    for event, args in [
        ("socket.__new__", (None, 2, 1, 0)),
        ("os.fork", ()),
        ("subprocess.Popen", ("ls", ["ls"], None, None)),
        ("ctypes.dlopen", ("libc.so.6",)),
        ("open", ("/etc/passwd", "r", 0)),
        ("open", ("/usr/lib/python3/os.py", "w", os.O_WRONLY)),
        ("os.mkdir", ("/tmp/elsewhere", 0o777, -1)),
        ("os.listdir", ("/",)),
    ]:
        with pytest.raises(PermissionError, match="sandbox: "):
            hook(event, args)
    hook("open", (os.path.join(work, "a.txt"), "w", os.O_WRONLY))
    hook("open", ("/usr/lib/python3/os.py", "r", 0))
    hook("open", (3, "r", 0))  # a descriptor: checked when it was opened
    hook("compile", (b"1", "<string>"))
    assert "os.fork" in BLOCKED_EVENTS


def test_capped_stream_drops_past_its_limit() -> None:
    sink = io.StringIO()
    stream = CappedStream(sink, 5)
    assert stream.write("abc") == 3 and stream.write("defgh") == 5
    stream.flush()
    assert sink.getvalue() == "abcde"
