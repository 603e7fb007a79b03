"""Fault points fire once, at their point and step, with the action they were armed with; unarmed they do nothing."""

from __future__ import annotations

import errno
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from relay import faults
from relay.faults import FAULT_ENV, Fault, fault_point, sent_marker


def _arm(monkeypatch, fault: Fault) -> None:
    monkeypatch.setenv(FAULT_ENV, fault.to_env())
    faults.armed.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_cache():
    faults.armed.cache_clear()
    yield
    faults.armed.cache_clear()


def test_an_unarmed_process_passes_every_point(monkeypatch) -> None:
    monkeypatch.delenv(FAULT_ENV, raising=False)
    fault_point("learner.update", 0)
    assert faults.armed() == ()


def test_enospc_fires_once_at_its_point_and_step(monkeypatch, tmp_path) -> None:
    _arm(monkeypatch, Fault("driver.checkpoint", 2, "enospc", str(tmp_path / "fired")))
    fault_point("driver.checkpoint", 1)
    fault_point("learner.update", 2)
    with pytest.raises(OSError) as caught:
        fault_point("driver.checkpoint", 2)
    assert caught.value.errno == errno.ENOSPC and "driver.checkpoint at step 2" in str(caught.value)
    fault_point("driver.checkpoint", 2)  # the marker exists: a resumed run passes
    assert (tmp_path / "fired").is_file()


@pytest.mark.parametrize(("action", "signum"), [("kill", signal.SIGKILL), ("stop", signal.SIGSTOP)])
def test_kill_and_stop_end_or_freeze_the_process(tmp_path, action: str, signum: int) -> None:
    fault = Fault("rollout.generate", 0, action, str(tmp_path / "fired"))
    code = "from relay.faults import fault_point; fault_point('rollout.generate', 0); print('survived')"
    env = {FAULT_ENV: fault.to_env(), "PYTHONPATH": "."}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    if action == "kill":
        assert proc.wait(timeout=60) == -signum
    else:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _state(proc.pid) != "T":
            time.sleep(0.05)
        assert _state(proc.pid) == "T"  # stopped, not dead: a hang
        proc.kill()
        proc.wait(timeout=60)
    assert "survived" not in proc.stdout.read()
    assert (tmp_path / "fired").is_file() and (tmp_path / "fired.sent").is_file()  # reached, then delivered


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_a_malformed_fault_names_the_variable() -> None:
    with pytest.raises(ValueError, match="RELAY_FAULT='nope': not a fault"):
        Fault.from_env("nope")
    with pytest.raises(ValueError, match="action 'explode' is not one of"):
        Fault("x", 0, "explode", "m")


def _run_with_fault(fault: Fault, code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter whose environment carries ``fault``, its output captured."""
    env = {FAULT_ENV: fault.to_env(), "PYTHONPATH": "."}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_a_delayed_kill_lets_the_work_after_the_point_begin(tmp_path) -> None:
    fault = Fault("learner.update", 1, "kill", str(tmp_path / "fired"), delay_s=0.5)
    code = (
        "import time; from relay.faults import fault_point; fault_point('learner.update', 1); print('began', "
        "flush=True); time.sleep(30); print('survived')"
    )
    proc = _run_with_fault(fault, code)
    assert proc.returncode == -signal.SIGKILL
    assert proc.stdout.split() == ["began"]


def test_a_delayed_kill_whose_process_ends_first_is_reached_but_never_sent(tmp_path) -> None:
    """The work after the point ends before the delay: the marker says the point was reached, nothing says the
    signal was sent (a campaign reads that as not fired, and its run must still equal the undisturbed one)."""
    fault = Fault("learner.update", 1, "kill", str(tmp_path / "fired"), delay_s=30.0)
    code = "from relay.faults import fault_point; fault_point('learner.update', 1); print('done')"
    proc = _run_with_fault(fault, code)
    assert proc.returncode == 0 and proc.stdout.split() == ["done"]
    assert (tmp_path / "fired").is_file() and not (tmp_path / "fired.sent").exists()


def test_a_delayed_kill_lands_at_the_next_point_when_the_work_was_quicker(tmp_path) -> None:
    """The delay was drawn from the undisturbed run's span of the work, and this run did the work faster: the kill
    lands as the process reaches its next fault point, before the next work begins, rather than never (a rollout's
    last-but-one validation killed with a delay longer than the rest of a quicker run would end with the run)."""
    fault = Fault("rollout.evaluate", 2, "kill", str(tmp_path / "fired"), delay_s=30.0)
    code = (
        "from relay.faults import fault_point; fault_point('rollout.evaluate', 2); print('evaluated', flush=True); "
        "fault_point('rollout.generate', 2); print('generated')"
    )
    proc = _run_with_fault(fault, code)
    assert proc.returncode == -signal.SIGKILL and proc.stdout.split() == ["evaluated"]  # killed at the next point
    assert (tmp_path / "fired.sent").is_file()


def test_the_delay_travels_through_the_environment() -> None:
    fault = Fault("rollout.generate", 3, "stop", "/tmp/m", delay_s=1.25)
    assert Fault.from_env(fault.to_env()) == (fault,)
    assert Fault.from_env('{"point": "p", "step": 0, "action": "kill", "marker": "m"}')[0].delay_s == 0.0


def test_a_fault_that_follows_another_fires_only_after_that_one_was_delivered(monkeypatch, tmp_path) -> None:
    """The second fault of a pair waits for the first one's delivery, then lands in the recovery: here the driver's
    checkpoint write fails (enospc), and the follow-up fails the same point again when the run retries it."""
    first = Fault("driver.checkpoint", 2, "enospc", str(tmp_path / "first"))
    second = Fault("driver.checkpoint", 2, "enospc", str(tmp_path / "second"), after=first.marker)
    monkeypatch.setenv(FAULT_ENV, faults.faults_to_env((second, first)))  # the order in the list does not matter
    assert Fault.from_env(faults.faults_to_env((first, second))) == (first, second)
    with pytest.raises(OSError):
        fault_point("driver.checkpoint", 2)  # the first (the second is not due: the first not yet delivered)
    assert (tmp_path / "first").is_file() and not (tmp_path / "second").exists()
    with pytest.raises(OSError):
        fault_point("driver.checkpoint", 2)  # the retry meets the second
    assert Path(sent_marker(second.marker)).is_file()
    fault_point("driver.checkpoint", 2)  # both fired: the point passes


def _stand_in_raylet(tmp_path: Path, fault: Fault) -> subprocess.Popen:
    """A process named ``raylet`` (prctl) that starts a worker armed with ``fault``, which reaches the point."""
    worker = f"from relay.faults import fault_point; fault_point({fault.point!r}, {fault.step})"
    raylet = tmp_path / "raylet.py"
    raylet.write_text(
        "import ctypes, subprocess, sys, time\n"
        "ctypes.CDLL(None).prctl(15, b'raylet', 0, 0, 0)  # PR_SET_NAME: the name psutil reads\n"
        f"subprocess.run([sys.executable, '-c', {worker!r}])\n"
        "time.sleep(60)  # alive and running unless the worker killed or stopped it\n"
    )
    return subprocess.Popen([sys.executable, str(raylet)], env={FAULT_ENV: fault.to_env(), "PYTHONPATH": "."})


def test_kill_node_kills_the_raylet_above_the_process(tmp_path) -> None:
    """The worker reaches the point and the raylet dies of SIGKILL, as the node's raylet does in a campaign."""
    fault = Fault("rollout.generate", 0, "kill_node", str(tmp_path / "fired"))
    proc = _stand_in_raylet(tmp_path, fault)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    assert (tmp_path / "fired").is_file()


def test_stop_node_pauses_the_raylet_above_the_process(tmp_path) -> None:
    """``stop_node``: the raylet is stopped (SIGSTOP), not killed: alive, answering nothing."""
    import psutil

    fault = Fault("reward.score", 1, "stop_node", str(tmp_path / "fired"))
    proc = _stand_in_raylet(tmp_path, fault)
    try:
        deadline = time.monotonic() + 60
        while psutil.Process(proc.pid).status() != psutil.STATUS_STOPPED and time.monotonic() < deadline:
            time.sleep(0.05)
        assert psutil.Process(proc.pid).status() == psutil.STATUS_STOPPED and proc.poll() is None
        assert Path(sent_marker(fault.marker)).is_file()
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_kill_node_outside_a_raylet_says_where_to_arm_it(monkeypatch, tmp_path) -> None:
    _arm(monkeypatch, Fault("driver.checkpoint", 1, "kill_node", str(tmp_path / "fired")))
    with pytest.raises(RuntimeError, match="no raylet above this process"):
        fault_point("driver.checkpoint", 1)


def test_a_short_write_cuts_the_next_file_on_disk(tmp_path) -> None:
    """After a short_write fault the process's next file is really cut at the cap, and the write says so (EFBIG)."""
    fault = Fault("driver.checkpoint", 1, "short_write", str(tmp_path / "fired"))
    target = tmp_path / "driver.json"
    code = (
        "import sys; from relay.faults import fault_point; fault_point('driver.checkpoint', 1)\n"
        "try:\n    with open(sys.argv[1], 'w') as f:\n        f.write('x' * 4096)\n"
        "except OSError as exc:\n    print(exc.errno)\n"
    )
    env = {FAULT_ENV: fault.to_env(), "PYTHONPATH": "."}
    proc = subprocess.run([sys.executable, "-c", code, str(target)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.split() == [str(errno.EFBIG)], proc.stderr
    assert target.stat().st_size == faults.SHORT_WRITE_BYTES and (tmp_path / "fired.sent").is_file()
