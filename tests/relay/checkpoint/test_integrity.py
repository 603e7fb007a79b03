"""A checkpoint's manifest: written last by every save, and a resume refuses a checkpoint whose files were cut
short, changed or deleted, naming the file and the reason, and falls back to the newest one that passes."""

from __future__ import annotations

import json

import pytest

from driver.cli import parse_args, resume_target
from relay.checkpoint import CheckpointError, checkpoint_path, list_checkpoints, resolve_resume, write_atomically
from relay.checkpoint.integrity import MANIFEST, problem


def _save(run_dir, step: int):
    def write(d) -> None:
        (d / "driver.json").write_text(json.dumps({"next_step": step}))
        (d / "learner").mkdir()
        (d / "learner" / "policy.safetensors").write_bytes(bytes(range(256)) * 64)

    return write_atomically(checkpoint_path(run_dir, step), write)


def test_every_save_records_its_files(tmp_path) -> None:
    checkpoint = _save(tmp_path, 2)
    files = json.loads((checkpoint / MANIFEST).read_text())["files"]
    assert sorted(files) == ["driver.json", "learner/policy.safetensors"]
    assert files["learner/policy.safetensors"]["bytes"] == 16384
    assert problem(checkpoint) is None


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda p: p.write_bytes(p.read_bytes()[:1000]), "has 1000 bytes, the manifest says 16384 (cut short"),
        (lambda p: p.write_bytes(b"\xff" + p.read_bytes()[1:]), "its SHA-256 differs from the manifest's"),
        (lambda p: p.unlink(), "is missing (the manifest lists it)"),
    ],
    ids=["truncated", "flipped", "deleted"],
)
def test_a_damaged_checkpoint_is_refused_and_the_run_resumes_from_the_newest_good_one(tmp_path, damage, reason):
    good, bad = _save(tmp_path, 2), _save(tmp_path, 4)
    damage(bad / "learner" / "policy.safetensors")
    assert reason in problem(bad)
    with pytest.raises(CheckpointError, match=rf"step_000004: refused, learner/policy.safetensors.*{good}"):
        resolve_resume(bad)
    run_dir, checkpoint, refused = resolve_resume(tmp_path)
    assert (run_dir, checkpoint) == (tmp_path, good)
    assert [(path, reason in why) for path, why in refused] == [(bad, True)]


def test_with_every_checkpoint_damaged_the_resume_says_there_is_none(tmp_path) -> None:
    for step in (2, 4):
        (_save(tmp_path, step) / MANIFEST).write_text("{not json")
    none_left = r"no usable checkpoint, every one was refused \(step_000004: "
    with pytest.raises(CheckpointError, match=none_left) as refused:
        resolve_resume(tmp_path)
    # and how to go on: the run's own config, under a new name (a chosen name that exists is refused)
    assert f"python trainer.py --config {tmp_path / 'config.yaml'} --set trainer.run_name=" in str(refused.value)


def test_the_cli_sets_a_refused_checkpoint_aside_and_says_so(tmp_path, capsys) -> None:
    good, bad = _save(tmp_path, 2), _save(tmp_path, 4)
    (bad / "driver.json").write_text(json.dumps({"next_step": 5}))  # same length, other bytes
    _, checkpoint, run_dir = resume_target(parse_args(["--resume", str(tmp_path)]))
    assert (checkpoint, run_dir) == (good, tmp_path)
    assert [p for _, p in list_checkpoints(tmp_path)] == [good]
    assert (tmp_path / "checkpoints" / "refused-step_000004").is_dir()
    err = capsys.readouterr().err
    assert f"checkpoint {bad} refused: driver.json: its SHA-256 differs" in err
    assert f"resuming from {good}, the newest usable checkpoint" in err


def test_a_checkpoint_from_before_manifests_still_resumes(tmp_path) -> None:
    checkpoint = _save(tmp_path, 2)
    (checkpoint / MANIFEST).unlink()
    assert resolve_resume(tmp_path) == (tmp_path, checkpoint, [])


def test_a_crash_between_the_renames_of_a_resave_loses_no_checkpoint(tmp_path) -> None:
    """Saving a step that already has a checkpoint swaps the two by renames; killed between them, the old copy is
    under ``.replaced-`` and ``--resume`` puts it back (before the swap, a crash there deleted the only copy)."""
    import subprocess
    import sys

    from relay.faults import FAULT_ENV, Fault

    first = _save(tmp_path, 4)
    manifest = (first / MANIFEST).read_text()
    fault = Fault("checkpoint.replace", 4, "kill", str(tmp_path / "fired"))
    code = (
        "import sys; from pathlib import Path; sys.path.insert(0, 'tests/relay/checkpoint'); "
        "from test_integrity import _save; _save(Path(sys.argv[1]), 4)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], env={FAULT_ENV: fault.to_env(), "PYTHONPATH": "."}, timeout=120
    )
    assert proc.returncode == -9
    assert list_checkpoints(tmp_path) == []  # the window: neither name holds step 4
    run_dir, checkpoint, refused = resolve_resume(tmp_path)
    assert (checkpoint, refused) == (first, [])
    assert (checkpoint / MANIFEST).read_text() == manifest and problem(checkpoint) is None
    assert not list((tmp_path / "checkpoints").glob(".replaced-*"))
