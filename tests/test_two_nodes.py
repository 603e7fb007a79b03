"""The real roles on a real Ray cluster of several nodes on this machine: ``ray start --head`` and
``ray start --address`` (each raylet with its own temp dir and ports, on a loopback address), and
``python trainer.py`` joining it as a user's job would.

The roles' CPU reservations force the layout: rollout and learner each ask for 1.5 of a node's 2 CPUs, so they land
on different nodes and the weights cross nodes through Ray's object store, never the same-node memory file. That
uninterrupted two-node run is the baseline. Then a node is lost in the first step (its raylet SIGKILLed): the run
ends with one message, and ``--resume`` on the node that is left (learner and rollout together: the memory-file
sync) computes every step exactly as the two-node run did. The 2-host TPU preset runs on the same cluster first: its
learner spans both nodes (a STRICT_SPREAD placement group), one learner process per node joined in one JAX job (gloo
on CPU), on the tiny Qwen2 of ``tests/test_presets_qwen.py``.

The default tests share one cluster (a head with no CPUs and two 2-CPU nodes): the 2-host preset, the baseline, then
the lost node, which loses one of them and so runs last. No cluster here is the test session's Ray: each is torn
down by terminating its own processes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from benchmarks.harness.ray_head import Head, isolated_head, kill_raylet, worker_node
from relay.config import load_config
from relay.repo import CONFIGS_DIR, REPO_ROOT
from tests.presets import NEEDS_TWO_NODES, check_preset_run, overrides

# What forces the layout: rollout and learner cannot share a 2-CPU node; reward fits beside either.
LAYOUT = ("rollout.resources.cpus=1.5", "learner.resources.cpus=1.5", "reward.resources.cpus=0.5")
# Metrics that measure this machine's speed or memory, not the run's numbers.
MACHINE_DEPENDENT = ("timing/", "throughput/", "memory/", "time/", "sync/", "learner/compile")


STEPS = 2


def _trainer(head, model_dir: Path, out: Path, *extra: str) -> subprocess.Popen:
    """``python trainer.py`` on the tiny preset for :data:`STEPS` steps with :data:`LAYOUT`, joining ``head``'s
    cluster; its run directory is ``out / "run"``."""
    argv = [sys.executable, "trainer.py", "--config", "configs/tiny.yaml", "--set", f"model.path={model_dir}"]
    run = (f"trainer.output_dir={out}", "trainer.run_name=run", "trainer.test_freq=-1")
    for override in (*LAYOUT, *run, f"trainer.total_training_steps={STEPS}", *extra):
        argv += ["--set", override]
    return _popen(head, argv)


def _popen(head, argv: list[str]) -> subprocess.Popen:
    pipe = subprocess.PIPE
    return subprocess.Popen(argv, cwd=REPO_ROOT, env=head.driver_env, stdout=pipe, stderr=pipe, text=True)


def _finished(proc: subprocess.Popen, timeout_s: float = 900) -> tuple[int, str]:
    out, err = proc.communicate(timeout=timeout_s)
    return proc.returncode, out[-3000:] + err[-3000:]


def _train(head, model_dir: Path, out: Path) -> Path:
    code, output = _finished(_trainer(head, model_dir, out))
    assert code == 0, output
    return out / "run"


@dataclasses.dataclass
class Cluster:
    """A head with no CPUs and two 2-CPU worker nodes at their own loopback addresses (``ray start`` pids by IP)."""

    head: Head
    nodes: dict[str, int]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with (
        isolated_head(num_cpus=0, dashboard=False) as head,
        worker_node(head, num_cpus=2, ip="127.0.0.2") as node_a,
        worker_node(head, num_cpus=2, ip="127.0.0.3") as node_b,
    ):
        yield Cluster(head, {"127.0.0.2": node_a, "127.0.0.3": node_b})


@pytest.mark.parametrize("preset", list(NEEDS_TWO_NODES))
def test_a_two_host_preset_runs_two_steps_on_two_nodes(preset: str, cluster: Cluster, request, tmp_path) -> None:
    """The 2-host TPU preset on the two nodes: one learner process per node joined in one JAX job (gloo on CPU),
    the other roles beside them; ``python trainer.py`` joins that cluster."""
    fixture, shorter = NEEDS_TWO_NODES[preset]
    model_dir = request.getfixturevalue(fixture)
    argv = [sys.executable, "trainer.py", "--config", f"configs/{preset}"]
    for override in overrides(model_dir, tmp_path, shorter):
        argv += ["--set", override]
    env = cluster.head.driver_env
    done = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = tmp_path / "preset"
    (roles,) = _events(run_dir, "roles")
    assert roles["nodes"]["learner-0"] != roles["nodes"]["learner-1"], roles
    loaded = load_config(CONFIGS_DIR / preset, overrides(model_dir, tmp_path, shorter), environ={})
    check_preset_run(loaded, model_dir, run_dir)


@pytest.fixture(scope="module")
def two_node_run(cluster: Cluster, tiny_model_dir, tmp_path_factory) -> Path:
    """The baseline: the run on the two 2-CPU nodes, rollout and learner apart."""
    return _train(cluster.head, tiny_model_dir, tmp_path_factory.mktemp("two"))


def _events(run_dir: Path, kind: str) -> list[dict]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == kind]


def _metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _same_numbers(one: dict, two: dict) -> list[str]:
    """The run-determined metrics that differ between two runs' rows (exactly: the same seed, the same
    threads per role, and a sync that moves the same bytes give the same floats)."""
    keys = [k for k in one if not k.startswith(MACHINE_DEPENDENT)]
    assert set(keys) <= set(two), set(keys) - set(two)
    bad = []
    for key in keys:
        a, b = one[key], two[key]
        both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
        if a != b and not both_nan:
            bad.append(f"{key}: {a!r} vs {b!r}")
    return bad


def test_roles_spread_over_two_nodes_sync_through_the_object_store(two_node_run) -> None:
    two = two_node_run
    (spread,) = _events(two, "roles")
    nodes = _events(two, "start")[0]["cluster"]["nodes"]
    assert sorted(n["total"].get("CPU", 0) for n in nodes) == [0, 2.0, 2.0], nodes  # the head has no CPUs
    assert spread["nodes"]["rollout-0"] != spread["nodes"]["learner-0"], spread
    assert spread["weight_sync"] == "object_store", spread
    rows = _metrics(two)
    assert [r["step"] for r in rows] == list(range(STEPS))
    assert all(r["sync/bytes"] > 0 for r in rows), rows


def _wait_for(predicate, proc: subprocess.Popen, what: str, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert proc.poll() is None, f"the run ended before {what}: {_finished(proc)[1]}"
        assert time.monotonic() < deadline, f"no {what} after {timeout_s} s"
        time.sleep(0.2)


def test_a_lost_node_ends_the_run_and_resume_continues_on_the_node_left(
    cluster: Cluster, two_node_run, tiny_model_dir, tmp_path
) -> None:
    """SIGKILL the raylet of the rollout's node as soon as the roles are placed, inside step 0's first generation
    (seconds long: the engine's first call), before the learner's first update: no node has room to restart the
    rollout, so within ``trainer.role_restart_timeout_s`` the run ends (exit 1) with one message naming the node and
    its roles, a ``node_lost`` error event and an emergency checkpoint of the state before step 0. ``--resume`` with
    the roles scaled down to the one node left (the same-node memory-file sync) computes every step exactly as the
    uninterrupted two-node run (object-store sync) did: one node and two train alike, and the resume loses nothing.
    (A failure after a step's update, in its sync, checkpoints the state after the step:
    ``driver.run_record.emergency_point``.) The module's last test on its cluster: the lost node stays lost."""
    timeout = ("trainer.role_restarts=1", "trainer.role_restart_timeout_s=20")
    run_dir = tmp_path / "run"
    proc = _trainer(cluster.head, tiny_model_dir, tmp_path, *timeout)
    events = run_dir / "events.jsonl"
    _wait_for(lambda: events.exists() and '"event": "roles"' in events.read_text(), proc, "the roles placed")
    (placed,) = _events(run_dir, "roles")
    lost = placed["nodes"]["rollout-0"]
    assert placed["nodes"]["learner-0"] != lost, placed
    kill_raylet(cluster.nodes[lost.split(" ")[0]])
    code, output = _finished(proc, timeout_s=300)
    assert code == 1, output
    assert f"node {lost} was lost; it held " in output and "rollout-0" in output, output
    assert f"--resume {run_dir}" in output, output

    (error,) = _events(run_dir, "error")
    held = sorted(name for name, node in placed["nodes"].items() if node == lost)
    assert (error["kind"], error["node"], error["roles"]) == ("node_lost", lost, held), error
    (emergency,) = [e for e in _events(run_dir, "checkpoint") if e.get("reason") == "emergency"]
    assert emergency["step"] == 0, emergency

    scaled_down = [f"{role}.resources.cpus=0.5" for role in ("rollout", "learner", "reward")]
    argv = [sys.executable, "trainer.py", "--resume", str(run_dir)]
    for override in scaled_down:
        argv += ["--set", override]
    code, output = _finished(_popen(cluster.head, argv))
    assert code == 0, output

    (resumed,) = _events(run_dir, "resume")
    assert resumed["step"] == 0, resumed
    together = _events(run_dir, "roles")[-1]  # recorded again by the resumed run
    assert len(set(together["nodes"].values())) == 1 and together["weight_sync"] == "shared_memory", together
    rows, baseline = _metrics(run_dir), _metrics(two_node_run)
    assert [r["step"] for r in rows] == list(range(STEPS))
    for row, same in zip(rows, baseline, strict=True):
        assert _same_numbers(same, row) == []
        assert row["sync/bytes"] == same["sync/bytes"] > 0


@pytest.mark.slow  # ~3 min: a third raylet and Ray's reschedule; the lost-node path itself runs by default (above)
def test_a_lost_rollout_node_is_replaced_by_a_node_with_room(two_node_run, tiny_model_dir, tmp_path) -> None:
    """Three 2-CPU nodes, two of them used: when the rollout's node is lost during step 1, Ray places its bundle
    on the idle node, the driver gives the new rollout the weights and retries the step; the run finishes with
    the same numbers as the uninterrupted two-node run."""
    run_dir = tmp_path / "run"
    with (
        isolated_head(num_cpus=0, dashboard=False) as head,
        worker_node(head, num_cpus=2, ip="127.0.0.2") as node_a,
        worker_node(head, num_cpus=2, ip="127.0.0.3") as node_b,
        worker_node(head, num_cpus=2, ip="127.0.0.4") as node_c,
    ):
        proc = _trainer(head, tiny_model_dir, tmp_path, "trainer.role_restarts=1")
        metrics = run_dir / "metrics.jsonl"
        _wait_for(lambda: metrics.exists() and metrics.read_text().count("\n") >= 1, proc, "step 0")
        placed = _events(run_dir, "roles")[0]
        lost = placed["nodes"]["rollout-0"]
        by_ip = {"127.0.0.2": node_a, "127.0.0.3": node_b, "127.0.0.4": node_c}
        kill_raylet(by_ip[lost.split(" ")[0]])
        code, output = _finished(proc, timeout_s=600)
        assert code == 0, output

    rows, baseline = _metrics(run_dir), _metrics(two_node_run)
    assert sum(r["recovery/restarts"] + r.get("recovery/stale_rollouts", 0) for r in rows) >= 1, rows
    assert _events(run_dir, "error") == []
    replaced = _events(run_dir, "roles")[-1]  # recorded again after the restart
    assert replaced["nodes"]["rollout-0"] not in (lost, placed["nodes"]["learner-0"]), replaced
    for row, same in zip(rows, baseline, strict=True):
        assert _same_numbers(same, {**row, "recovery/restarts": same["recovery/restarts"]}) == []


def _learner_in_update(ray_starts: set[int]) -> psutil.Process | None:
    """A learner process of this test's cluster (under one of its ``ray start`` processes ``ray_starts``, not another
    test's: tests run in parallel) while it runs an update (Ray titles it ``ray::LearnerWorker.update``)."""
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        with contextlib.suppress(psutil.NoSuchProcess):
            if cmdline.startswith("ray::LearnerWorker.update") and any(p.pid in ray_starts for p in proc.parents()):
                return proc
    return None


# ~100 s (AMD EPYC, 2 cores): two raylets and a two-host learner. The watchdog itself ends a stopped peer's collective
# in tests/relay/learner/test_watchdog_processes.py (7 s), and a learner's death ending the run with its name is
# tests/driver/test_recovery.py::test_learner_death_stops_the_step_with_its_name, both in the default run.
@pytest.mark.slow
def test_a_stopped_learner_host_ends_the_run_through_the_collective_watchdog(tiny_model_dir, tmp_path) -> None:
    """A learner on two hosts (one JAX job over two raylets); one host is SIGSTOPped mid-update. The other waits in
    a collective until ``learner.collective_timeout_s``, then ends its process with one line naming its host and
    the phase; the driver ends the run (exit 1) with that learner's death, the line from its log and an ``error``
    event."""
    two_hosts = (
        "learner.hosts=2",
        "learner.devices_per_host=2",
        "learner.mesh={dp: 2, fsdp: 2, tp: 1}",
        "learner.collective_timeout_s=20",
        *(f"{role}.resources.cpus=0.5" for role in ("rollout", "learner", "reward", "actor_ref")),
    )
    argv = [sys.executable, "trainer.py", "--config", "configs/tiny.yaml", "--set", f"model.path={tiny_model_dir}"]
    for override in (*two_hosts, f"trainer.output_dir={tmp_path}", "trainer.run_name=run", "trainer.test_freq=-1"):
        argv += ["--set", override]
    with isolated_head(num_cpus=2, dashboard=False) as head, worker_node(head, num_cpus=2) as node:
        proc = _popen(head, argv)
        found: list[psutil.Process] = []

        def in_update() -> bool:
            found.extend(filter(None, [_learner_in_update({head.pid, node})]))
            return bool(found)

        _wait_for(in_update, proc, "an update")
        stopped = found[0]
        stopped.suspend()
        try:
            code, output = _finished(proc, timeout_s=300)
        finally:
            with contextlib.suppress(psutil.NoSuchProcess):
                stopped.kill()  # the driver's teardown has usually killed it already
    assert code == 1, output
    assert "did not finish within learner.collective_timeout_s=20 s" in output, output
    (error,) = _events(tmp_path / "run", "error")
    assert error["kind"] == "role_failed" and error["actor"].startswith("learner-"), error
    assert "during update" in error["message"], error
