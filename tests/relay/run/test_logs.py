"""The quiet terminal's plumbing: a process's output into its log file, the driver's library logs, tails."""

from __future__ import annotations

import logging
import subprocess
import sys
import warnings
from pathlib import Path

from driver.console import header_lines, print_role_log_tail
from relay.run.logs import (
    progress_bar_wanted,
    quiet_requested,
    role_log_path,
    route_library_logs,
    tail,
    unroute_library_logs,
)

CHILD = """
import logging, os, subprocess, sys
from relay.run.logs import apply_role_log
print("before")
sys.stdout.flush()
apply_role_log({"RELAY_ROLE_LOG": sys.argv[1]})
print("to stdout")
print("to stderr", file=sys.stderr)
logging.getLogger("vllm").warning("a library warning")
os.write(1, b"raw fd 1\\n")
subprocess.run([sys.executable, "-c", "print('from a child process')"], check=True)
"""


def test_a_role_process_writes_everything_after_the_redirect_to_its_file(tmp_path: Path) -> None:
    log = role_log_path(tmp_path / "run", "rollout-0")
    assert log == tmp_path / "run" / "logs" / "rollout-0.log"
    out = subprocess.run([sys.executable, "-c", CHILD, str(log)], capture_output=True, text=True, check=True)
    assert out.stdout == "before\n" and out.stderr == ""
    text = log.read_text()
    for line in ("to stdout", "to stderr", "a library warning", "raw fd 1", "from a child process"):
        assert line in text
    subprocess.run([sys.executable, "-c", CHILD, str(log)], capture_output=True, check=True)  # a restart appends
    assert log.read_text().count("to stdout") == 2


def test_library_logs_and_warnings_go_to_the_driver_log(tmp_path: Path, capsys) -> None:
    path = tmp_path / "logs" / "driver.log"
    handler = route_library_logs(path, names=("relaytestlib",))
    try:
        logging.getLogger("relaytestlib.sub").warning("library noise")
        warnings.warn("a deprecation nobody acts on", DeprecationWarning, stacklevel=1)
    finally:
        unroute_library_logs(handler, names=("relaytestlib",))
    captured = capsys.readouterr()
    assert "library noise" not in captured.err + captured.out
    text = path.read_text()
    assert "relaytestlib.sub WARNING library noise" in text and "a deprecation nobody acts on" in text
    assert not logging.getLogger("relaytestlib").propagate


def test_tail_quiet_flag_and_header(tmp_path: Path, capsys) -> None:
    log = role_log_path(tmp_path, "learner-0")
    assert tail(log) == []
    log.parent.mkdir(parents=True)
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert tail(log, 3) == ["line 97", "line 98", "line 99"]
    print_role_log_tail(tmp_path, "learner-0")
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"--- last 30 lines of {log} ---" and err[1] == "  line 70" and err[-2] == "  line 99"
    assert quiet_requested(False, {}) and not quiet_requested(True, {})
    assert not quiet_requested(False, {"RELAY_LOG_LEVEL": "verbose"})
    assert quiet_requested(False, {"RELAY_LOG_LEVEL": "x"})
    assert header_lines(Path("o/r"), Path("/m"), None, quiet=False) == ["run: o/r", "model: /m"]


def test_the_progress_bar_only_on_a_terminal(tmp_path: Path) -> None:
    class Terminal:
        def isatty(self) -> bool:
            return True

    assert progress_bar_wanted(Terminal())
    with (tmp_path / "job.log").open("w") as log:  # ray job logs, the dashboard's job log, a redirect
        assert not progress_bar_wanted(log)
    assert not progress_bar_wanted(log)  # closed: isatty raises ValueError
    assert not progress_bar_wanted(object())
