"""`ray job submit -- python trainer.py` against a local head, as the README shows it.

The head runs apart from the test session's Ray (its own ports and temp dir) with the dashboard on
127.0.0.1; the test submits a 2-step tiny-model job with the repo as the working dir, checks that it
succeeds with its step lines in the job's logs, and that the driver's per-step gauges reach the
node's Prometheus endpoint while it runs. Teardown terminates exactly the head's process tree
(never `ray stop`, which would also stop the session's Ray).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[1]
RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def head():
    # Every port of its own: the session's Ray already runs a dashboard agent on Ray's default agent
    # port (52365), and a second agent there never comes up ("No available agent to submit job").
    names = ("gcs", "dashboard", "metrics", "agent_listen", "agent_grpc", "runtime_env_agent")
    ports = {name: _free_port() for name in names}
    temp_dir = tempfile.mkdtemp(prefix="rj", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_metrics_report_interval_ms": "1000"}
    log = open(Path(temp_dir) / "ray-start.log", "w")  # noqa: SIM115 - closed in teardown
    proc = subprocess.Popen(
        [
            RAY,
            "start",
            "--head",
            "--block",
            f"--port={ports['gcs']}",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={ports['dashboard']}",
            f"--metrics-export-port={ports['metrics']}",
            f"--dashboard-agent-listen-port={ports['agent_listen']}",
            f"--dashboard-agent-grpc-port={ports['agent_grpc']}",
            f"--runtime-env-agent-port={ports['runtime_env_agent']}",
            "--num-cpus=2",
            f"--temp-dir={temp_dir}",
            "--disable-usage-stats",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{ports['dashboard']}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if _reachable(f"{url}/api/version") or proc.poll() is not None:
            break
        time.sleep(1)
    tree = [psutil.Process(proc.pid), *_children(proc.pid)] if proc.poll() is None else []
    try:
        assert proc.poll() is None, (Path(temp_dir) / "ray-start.log").read_text()
        yield {"url": url, "env": env, **ports}
    finally:
        tree += [p for p in _children(proc.pid) if p not in tree]  # workers started since
        for p in tree:
            _signal(p, "terminate")
        _, alive = psutil.wait_procs(tree, timeout=15)
        for p in alive:
            _signal(p, "kill")
        proc.wait(timeout=15)
        log.close()


def _children(pid: int) -> list:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _signal(p, how: str) -> None:
    with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
        getattr(p, how)()


def _reachable(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2)  # noqa: S310 - local dashboard
        return True
    except urllib.error.HTTPError:
        return True  # answered (401 under token auth): the server is up
    except OSError:
        return False


def _watch_metrics(port: int, seen: list[str], stop: threading.Event) -> None:
    """Poll the node's Prometheus endpoint while the job runs; keep the Relay lines."""
    while not stop.is_set():
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()  # noqa: S310
            seen.extend(ln for ln in text.splitlines() if ln.startswith("ray_relay_") or ln.startswith("relay_"))
        except OSError:
            pass
        stop.wait(1.0)


def test_ray_job_submit_runs_the_trainer(head, tiny_model_dir, tmp_path) -> None:
    seen: list[str] = []
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_metrics, args=(head["metrics"], seen, stop), daemon=True)
    watcher.start()
    cmd = [
        RAY,
        "job",
        "submit",
        "--address",
        head["url"],
        "--working-dir",
        str(REPO),
        "--",
        sys.executable,
        "trainer.py",
        "--config",
        "configs/tiny.yaml",
        "--set",
        f"model.path={tiny_model_dir}",
        "--set",
        "rollout.engine=hf",
        "--set",
        "trainer.total_training_steps=2",
        "--set",
        f"trainer.output_dir={tmp_path}",
        "--set",
        "trainer.run_name=submitted",
    ]
    try:
        deadline = time.monotonic() + 120
        while True:
            out = subprocess.run(cmd, env=head["env"], capture_output=True, text=True, timeout=600, cwd=REPO)
            # the dashboard answers before its job agent is up (slow on a busy 2-core machine): retry that only
            if "No available agent to submit job" not in out.stderr + out.stdout or time.monotonic() > deadline:
                break
            time.sleep(3)
    finally:
        stop.set()
        watcher.join(timeout=5)
    logs = out.stdout + out.stderr
    assert out.returncode == 0 and "succeeded" in logs, logs[-4000:]
    assert "roles started in Ray namespace relay-submitted: rollout-0, actor_ref-0, reward-0, learner-0" in logs
    assert re.search(r"^\s*step\s+reward\s+acc", logs, re.M), logs[-4000:]
    assert re.search(r"^\s*1\s+-?\d+\.\d{3}\s", logs, re.M), logs[-4000:]  # the second step's row
    assert (tmp_path / "submitted" / "metrics.jsonl").read_text().count("\n") == 2
    # the quiet terminal (issue 17): every role's output in its own log file, none forwarded to the job's log
    log_dir = tmp_path / "submitted" / "logs"
    roles = {"rollout-0.log", "actor_ref-0.log", "reward-0.log", "learner-0.log"}
    assert roles <= {p.name for p in log_dir.iterdir()}, sorted(log_dir.iterdir())
    assert "Worker pid=" not in logs, logs[-4000:]  # Ray's "(RolloutWorker pid=…)" forwarding is off
    assert f"run: {tmp_path / 'submitted'} (logs: {log_dir}/" in logs
    gauges = [ln for ln in seen if 'run="submitted"' in ln]
    assert any(ln.startswith("ray_relay_step_seconds{") for ln in gauges), seen[-20:]
