"""What a campaign reads from a run directory: whether a fault's delivery record names a process the run's own
record gives the point's role (``delivery_problem``), with the records a wrong target leaves; what of a checkpoint
the verdict compares (``checkpoint_fingerprint``)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.faults.run_dir import checkpoint_fingerprint, delivery_problem
from relay.faults import Fault, sent_marker


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    processes = {"reward-0": {"pid": 30, "actor_id": "aa"}, "learner-0": {"pid": 40, "actor_id": "bb"}}
    events = [{"event": "start", "pid": 10}, {"event": "roles", "processes": processes}, {"event": "start", "pid": 11}]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return run


def _sent(tmp_path: Path, point: str, action: str, **sent) -> Fault:
    fault = Fault(point, 1, action, str(tmp_path / f"{point}.fired"))
    Path(sent_marker(fault.marker)).write_text(json.dumps({"time": 0.0, **sent}))
    return fault


def test_a_fault_sent_by_a_process_of_its_role_at_itself_is_delivered(tmp_path) -> None:
    run = _run(tmp_path)
    assert delivery_problem(_sent(tmp_path, "reward.score", "kill", pid=31, actor_id="aa", target=31), run) is None
    assert (
        delivery_problem(_sent(tmp_path, "driver.checkpoint", "enospc", pid=11, actor_id=None, target=None), run)
        is None
    )
    node = _sent(tmp_path, "learner.update", "kill_node", pid=40, actor_id="bb", target=7)  # its raylet
    assert delivery_problem(node, run) is None


def test_a_fault_that_hit_another_process_is_not_delivered(tmp_path) -> None:
    run = _run(tmp_path)
    other_role = _sent(tmp_path, "reward.score", "kill", pid=41, actor_id="bb", target=41)
    assert "not one of this run's reward actors" in delivery_problem(other_role, run)
    unknown_driver = _sent(tmp_path, "driver.between_steps", "term", pid=12, actor_id=None, target=12)
    assert "not a driver of this run" in delivery_problem(unknown_driver, run)
    elsewhere = _sent(tmp_path, "learner.update", "stop", pid=40, actor_id="bb", target=99)
    assert "stop sent to pid 99" in delivery_problem(elsewhere, run)


def _checkpoint(path: Path, **driver) -> Path:
    path.mkdir(parents=True)
    state = {"next_step": 2, "data": {"epoch": 0, "position": 8}, "kl_coef": 0.001, **driver}
    (path / "driver.json").write_text(json.dumps(state))
    (path / "learner").mkdir()
    (path / "learner" / "policy.safetensors").write_bytes(b"weights")
    return path


def test_a_checkpoints_fingerprint_leaves_out_the_run_and_the_resumes_row_but_not_its_state(tmp_path) -> None:
    """An emergency checkpoint keeps the step's row for the resume to record (``unrecorded``), its save time and the
    run's config fingerprint differ too: none of these is training state. A data cursor one prompt on is."""
    normal = checkpoint_fingerprint(_checkpoint(tmp_path / "a", saved_at="t0", config_sha256="x"))
    emergency = _checkpoint(tmp_path / "b", saved_at="t1", config_sha256="y", unrecorded={"step": 1, "metrics": {}})
    assert checkpoint_fingerprint(emergency) == normal
    moved = _checkpoint(tmp_path / "c", saved_at="t0", config_sha256="x", data={"epoch": 0, "position": 9})
    assert checkpoint_fingerprint(moved)["driver.json"] != normal["driver.json"]
    (emergency / "learner" / "policy.safetensors").write_bytes(b"other")
    assert checkpoint_fingerprint(emergency)["learner/policy.safetensors"] != normal["learner/policy.safetensors"]
