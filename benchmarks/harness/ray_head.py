"""An isolated Ray head for tests and benchmarks that need ``ray start`` / ``ray job submit``.

Its own ports (every one: a second dashboard agent on Ray's default agent port never comes up) and its own
short ``--temp-dir``; teardown terminates exactly the head's process tree, never ``ray stop`` (which would stop
every Ray on the machine).

    with isolated_head(env={"RAY_metrics_report_interval_ms": "1000"}) as head:
        subprocess.run([RAY, "job", "submit", "--address", head.url, ...], env=head.env)
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RAY = str(Path(sys.executable).with_name("ray"))
PORT_NAMES = ("gcs", "dashboard", "metrics", "agent_listen", "agent_grpc", "runtime_env_agent")
# What `ray start` logs once the node's processes are up (Ray 2.60 scripts.py), the readiness of a head without a
# dashboard to ask.
RUNTIME_STARTED = "Ray runtime started."


@dataclass
class Head:
    url: str  # the dashboard, http://127.0.0.1:<port>
    env: dict[str, str]  # the environment the head runs with: use it for ray CLI calls
    ports: dict[str, int]
    temp_dir: Path
    pid: int
    extra: dict[str, str] = field(default_factory=dict)
    restart: Callable[[], None] | None = field(default=None, repr=False)  # start again on the same ports

    @property
    def address(self) -> str:
        """The GCS address other nodes and drivers join, ``127.0.0.1:<port>``."""
        return f"127.0.0.1:{self.ports['gcs']}"

    @property
    def driver_env(self) -> dict[str, str]:
        """The environment a ``python trainer.py`` started here needs to join this cluster (not any other Ray)."""
        return {**self.env, "RAY_ADDRESS": self.address}

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['metrics']}/metrics"


def free_port() -> int:
    return free_ports(("port",))["port"]


def free_ports(names: Sequence[str]) -> dict[str, int]:
    """A free port for each of ``names``, all distinct: every socket stays bound until all are chosen (ports taken
    one at a time can repeat, and ``ray start`` refuses two components on one port)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in names]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return {name: s.getsockname()[1] for name, s in zip(names, sockets, strict=True)}


def reachable(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2)  # noqa: S310 - a local dashboard
        return True
    except urllib.error.HTTPError:
        return True  # answered (401 under token auth): the server is up
    except OSError:
        return False


@dataclass
class _HeadProcess:
    """A running ``ray start --head --block``: its process, the tree it started, and its log."""

    proc: subprocess.Popen
    tree: list
    log: Any

    def stop(self) -> None:
        _stop_tree(self.proc, self.tree)
        self.log.close()


def _start_head(
    ports: dict[str, int], temp_dir: Path, env: dict[str, str], num_cpus: int, timeout_s: float, dashboard: bool
):
    """Start the head on ``ports`` and wait until its dashboard answers, or without a dashboard until ``ray start``
    says the runtime started (or it exits, a RuntimeError)."""
    import psutil

    log_path = temp_dir / "ray-start.log"
    started_before = log_path.read_text().count(RUNTIME_STARTED) if log_path.exists() else 0
    log = open(log_path, "a")  # noqa: SIM115 - closed by _HeadProcess.stop
    proc = subprocess.Popen(
        [
            RAY,
            "start",
            "--head",
            "--block",
            f"--port={ports['gcs']}",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={ports['dashboard']}",
            *([] if dashboard else ["--include-dashboard=false"]),
            *_node_flags(ports, num_cpus, temp_dir),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{ports['dashboard']}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if dashboard:
            up = reachable(f"{url}/api/version")
        else:
            up = log_path.read_text(errors="replace").count(RUNTIME_STARTED) > started_before
        if up or proc.poll() is not None:
            break
        time.sleep(1)
    if proc.poll() is not None:
        log.close()
        raise RuntimeError(f"ray start failed:\n{(temp_dir / 'ray-start.log').read_text()[-3000:]}")
    return _HeadProcess(proc, [psutil.Process(proc.pid), *_children(proc.pid)], log)


def gcs_answers(head: Head) -> bool:
    """Whether the head's GCS accepts a connection on its port (a killed one refuses at once)."""
    try:
        socket.create_connection(("127.0.0.1", head.ports["gcs"]), timeout=2).close()
        return True
    except OSError:
        return False


def _own_token(temp_dir: Path) -> dict[str, str]:
    """The head's own authentication token, in its temp dir: ``{"RAY_AUTH_TOKEN_PATH": ...}``. ``ray start`` with
    token authentication needs a token to exist and never makes one (Ray 2.60, ``scripts.py``:
    ``ensure_token_if_auth_enabled(..., create_token_if_missing=False)``; only a local ``ray.init()`` writes
    ``~/.ray/auth_token``), so on a machine where nothing called ``ray.init()`` yet the head would not start; its own
    file also leaves the user's ``~/.ray`` alone. A token already given in the environment is kept."""
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return {}
    import secrets

    path = temp_dir / "auth_token"
    path.write_text(secrets.token_hex(32))
    path.chmod(0o600)
    return {"RAY_AUTH_TOKEN_PATH": str(path)}


@contextlib.contextmanager
def isolated_head(
    env: Mapping[str, str] | None = None, num_cpus: int = 2, timeout_s: float = 120, dashboard: bool = True
) -> Iterator[Head]:
    """Start ``ray start --head --block`` with its own ports and temp dir; yield a :class:`Head`; tear it down.
    ``head.restart()`` starts it again on the same ports (the address its drivers join) after its GCS was lost.
    ``dashboard=False`` (``--include-dashboard=false``) is for a head whose drivers join by its GCS address and never
    submit a job or read the dashboard: idle, a head used 4.6 CPU-seconds a minute with its dashboard and 2.7 without
    it (20 processes against 9), and 7.9 against 6.5 CPU-seconds in its first 10 s (AMD EPYC, 2 cores, 2026-12-03)."""
    ports = free_ports(PORT_NAMES)
    temp_dir = Path(tempfile.mkdtemp(prefix="rj", dir="/tmp"))  # short: Ray's socket paths must fit 107 bytes
    head_env = {**os.environ, "RAY_AUTH_MODE": "token", **_own_token(temp_dir), **(env or {})}
    running = [_start_head(ports, temp_dir, head_env, num_cpus, timeout_s, dashboard)]
    head = Head(url=f"http://127.0.0.1:{ports['dashboard']}", env=head_env, ports=ports, temp_dir=temp_dir, pid=0)

    def restart() -> None:
        running.pop().stop()
        running.append(_start_head(ports, temp_dir, head_env, num_cpus, timeout_s, dashboard))
        head.pid = running[-1].proc.pid

    head.pid, head.restart = running[-1].proc.pid, restart
    try:
        yield head
    finally:
        for process in running:
            process.stop()


def submit_job(head: Head, cmd: list[str], cwd: Path, timeout_s: float = 600) -> subprocess.CompletedProcess:
    """Run a job-submitting command against ``head``, retrying only while the dashboard's job agent is not up
    yet (the dashboard answers before its agent on a busy 2-core machine)."""
    deadline = time.monotonic() + 120
    while True:
        out = subprocess.run(cmd, env=head.env, capture_output=True, text=True, timeout=timeout_s, cwd=cwd)
        if "No available agent to submit job" not in out.stderr + out.stdout or time.monotonic() > deadline:
            return out
        time.sleep(3)


def _node_flags(ports: dict[str, int], num_cpus: int, temp_dir: Path) -> list[str]:
    """The ``ray start`` flags a head and a worker node both take: their agents' and metrics' ports, CPUs, temp dir."""
    return [
        f"--metrics-export-port={ports['metrics']}",
        f"--dashboard-agent-listen-port={ports['agent_listen']}",
        f"--dashboard-agent-grpc-port={ports['agent_grpc']}",
        f"--runtime-env-agent-port={ports['runtime_env_agent']}",
        f"--num-cpus={num_cpus}",
        f"--temp-dir={temp_dir}",
        "--disable-usage-stats",
    ]


def _stop_tree(proc: subprocess.Popen, tree: list) -> None:
    """Terminate ``ray start``'s processes (``tree`` plus any started since), SIGKILL what is left after 5 s (a Ray
    process ignoring SIGTERM would cost that much), and reap ``proc``."""
    import psutil

    tree += [p for p in _children(proc.pid) if p not in tree]
    for p in tree:
        _signal(p, "terminate")
    _, alive = psutil.wait_procs(tree, timeout=5)
    for p in alive:
        _signal(p, "kill")
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=15)


def _children(pid: int) -> list:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _signal(p, how: str) -> None:
    import psutil

    with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
        getattr(p, how)()


@contextlib.contextmanager
def worker_node(head: Head, num_cpus: int = 2, ip: str = "127.0.0.1", timeout_s: float = 120) -> Iterator[int]:
    """Join one more raylet to ``head`` (``ray start --address``, its own ports and temp dir, at the loopback
    address ``ip``: give each worker its own, 127.0.0.2, 127.0.0.3 …, to tell them apart); yield the pid of
    ``ray start``; terminate its process tree on exit. A second node on one machine: what a two-node cluster is to
    Ray (:func:`kill_raylet` loses it as a machine would be lost)."""
    import psutil

    names = ("node_manager", "object_manager", "metrics", "agent_listen", "agent_grpc", "runtime_env_agent")
    ports = free_ports(names)
    temp_dir = Path(tempfile.mkdtemp(prefix="rw", dir="/tmp"))
    log = open(temp_dir / "ray-start.log", "w")  # noqa: SIM115 - closed in teardown
    proc = subprocess.Popen(
        [
            RAY,
            "start",
            f"--address={head.address}",
            "--block",
            f"--node-ip-address={ip}",
            f"--node-manager-port={ports['node_manager']}",
            f"--object-manager-port={ports['object_manager']}",
            *_node_flags(ports, num_cpus, temp_dir),
        ],
        env=head.env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    # ``ray start`` says the runtime started only once the GCS lists the new node (ray/_private/node.py, Ray 2.60:
    # ``Node.__init__`` polls ``services.get_node`` after starting the raylet), so its own log tells that it joined;
    # ``ray status`` would cost ~1.8 CPU-s a poll.
    joined = temp_dir / "ray-start.log"
    deadline = time.monotonic() + timeout_s
    while RUNTIME_STARTED not in joined.read_text(errors="replace") and proc.poll() is None:
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    tree = [psutil.Process(proc.pid), *_children(proc.pid)] if proc.poll() is None else []
    try:
        if RUNTIME_STARTED not in joined.read_text(errors="replace") or proc.poll() is not None:
            raise RuntimeError(f"the worker node did not join:\n{joined.read_text()[-3000:]}")
        yield proc.pid
    finally:
        _stop_tree(proc, tree)
        log.close()


def active_node_count(head: Head) -> int:
    """How many nodes ``ray status`` lists as active on ``head``'s cluster."""
    out = subprocess.run([RAY, "status", f"--address={head.address}"], env=head.env, capture_output=True, text=True)
    active = out.stdout.split("Active:", 1)[-1].split("Pending:", 1)[0] if "Active:" in out.stdout else ""
    return sum(1 for line in active.splitlines() if line.strip().startswith("1 node_"))


def raylet_alive(start_pid: int) -> bool:
    """Whether the node :func:`worker_node` started (``start_pid``) still has a raylet that runs: a killed one not
    yet reaped (a zombie) is not alive, nor is a stopped one (SIGSTOP: it answers nothing, and once the GCS's health
    check gives up on it the node is dead to the cluster; its teardown SIGKILLs it)."""
    import psutil

    for p in _children(start_pid):
        with contextlib.suppress(psutil.NoSuchProcess):
            if p.name() == "raylet" and p.status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_STOPPED):
                return True
    return False


def kill_raylet(start_pid: int) -> None:
    """SIGKILL the raylet of the node :func:`worker_node` started (``start_pid``): the node is lost as a machine
    that lost power would be; its workers notice their raylet is gone and exit."""

    (raylet,) = [p for p in _children(start_pid) if p.name() == "raylet"]
    raylet.kill()
