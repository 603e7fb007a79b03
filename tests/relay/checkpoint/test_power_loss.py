"""A power loss cannot leave a published checkpoint that passes with lost data: every file and directory of a
checkpoint is fsynced before the rename that publishes it, and ``checkpoints/`` after it.

The power-loss model: a file's bytes are durable as of its last fsync; any file written after it (or never fsynced)
may come back empty or cut short, as with delayed allocation on ext4 or xfs. :func:`lose_unsynced_data` applies that
to the files of a run directory, given the fsyncs a save made (recorded by :func:`record_syscalls`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from relay.checkpoint import store
from relay.checkpoint.integrity import MANIFEST
from relay.checkpoint.store import checkpoint_path, newest_usable_checkpoint, write_atomically

# (st_dev, st_ino) -> (st_size, st_mtime_ns) at the file's last fsync: a rename keeps the inode, so a file fsynced
# under the temporary directory is found again in the published one.
Synced = dict[tuple[int, int], tuple[int, int]]


def _write_checkpoint(step: int):
    def write(d: Path) -> None:
        (d / "driver.json").write_text(json.dumps({"next_step": step}))
        (d / "learner").mkdir()
        (d / "learner" / "policy.safetensors").write_bytes(bytes(range(256)) * 64)
        (d / "learner" / "learner.json").write_text(json.dumps({"step": step}))
        (d / "hf").mkdir()
        (d / "hf" / "config.json").write_text("{}")

    return write


def _save(run_dir: Path, step: int) -> Path:
    return write_atomically(checkpoint_path(run_dir, step), _write_checkpoint(step))


def record_syscalls(monkeypatch: pytest.MonkeyPatch) -> tuple[list[tuple], Synced]:
    """Record every ``os.fsync`` (as ``("fsync", path)``) and ``os.rename`` (``("rename", src, dst)``) in order, and
    the state each fsynced file had; both call through to the real ones."""
    calls: list[tuple] = []
    synced: Synced = {}
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        real_fsync(fd)
        info = os.fstat(fd)
        synced[(info.st_dev, info.st_ino)] = (info.st_size, info.st_mtime_ns)
        calls.append(("fsync", Path(os.readlink(f"/proc/self/fd/{fd}"))))

    def rename(src, dst) -> None:
        real_rename(src, dst)
        calls.append(("rename", Path(src), Path(dst)))

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    return calls, synced


def lose_unsynced_data(root: Path, synced: Synced, keep: float) -> list[Path]:
    """A power loss under ``root``: every file not fsynced since it was last written keeps only the first ``keep``
    share of its bytes (0: empty). Returns the files cut."""
    lost = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        info = path.stat()
        if synced.get((info.st_dev, info.st_ino)) != (info.st_size, info.st_mtime_ns):
            os.truncate(path, int(info.st_size * keep))
            lost.append(path)
    return lost


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@pytest.mark.parametrize("resave", [False, True], ids=["new-step", "same-step-saved-again"])
def test_every_file_and_directory_is_fsynced_before_the_publishing_rename_and_the_parent_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, resave: bool
) -> None:
    if resave:
        _save(tmp_path, 4)
    calls, _ = record_syscalls(monkeypatch)
    final = _save(tmp_path, 4)

    publish = next(i for i, call in enumerate(calls) if call[0] == "rename" and call[2] == final)
    tmp = calls[publish][1]
    assert tmp.name == f".tmp-step_000004-{os.getpid()}"
    first_rename = next(i for i, call in enumerate(calls) if call[0] == "rename")
    before = {call[1] for call in calls[:first_rename] if call[0] == "fsync"}
    published = {tmp / path.relative_to(final) for path in final.rglob("*")} | {tmp}
    assert {tmp / MANIFEST, tmp / "learner" / "policy.safetensors", tmp / "hf"} <= published
    assert sorted(published - before) == []  # every file and directory, before any rename of the save
    assert ("fsync", final.parent) in calls[publish + 1 :]


@pytest.mark.parametrize("keep", [0.0, 0.5], ids=["emptied", "cut-in-half"])
@pytest.mark.parametrize("driver_files_survive", [False, True], ids=["all-unsynced-lost", "learner-files-lost"])
def test_without_fsync_a_checkpoint_that_lost_data_is_refused_and_resume_falls_back_to_the_previous_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep: float, driver_files_survive: bool
) -> None:
    _, synced = record_syscalls(monkeypatch)
    good = _save(tmp_path, 2)
    monkeypatch.setattr(store, "fsync_tree", lambda root: None)  # a store that never fsyncs the checkpoint
    bad = _save(tmp_path, 4)
    if driver_files_survive:  # the driver's small files happened to be written back in time, the learner's not
        for name in ("driver.json", MANIFEST):
            _fsync_file(bad / name)

    lost = lose_unsynced_data(tmp_path, synced, keep)

    assert bad / "learner" / "policy.safetensors" in lost and not [p for p in lost if good in p.parents]
    usable, refused = newest_usable_checkpoint(tmp_path)
    assert usable == good
    assert [path for path, _ in refused] == [bad]
    reason = refused[0][1]
    assert reason == store.checkpoint_problem(bad)
    if driver_files_survive:
        assert "the manifest says" in reason and reason.endswith("(cut short or overwritten)")
    else:
        assert f"{MANIFEST} is unreadable" in reason


@pytest.mark.parametrize("keep", [0.0, 0.5], ids=["emptied", "cut-in-half"])
def test_with_the_real_store_a_power_loss_after_a_save_loses_nothing_and_resume_uses_the_newest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep: float
) -> None:
    _, synced = record_syscalls(monkeypatch)
    _save(tmp_path, 2)
    newest = _save(tmp_path, 4)

    assert lose_unsynced_data(tmp_path, synced, keep) == []
    assert newest_usable_checkpoint(tmp_path) == (newest, [])


def test_a_file_written_after_its_fsync_counts_as_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model itself: only the state a file had at its last fsync survives."""
    _, synced = record_syscalls(monkeypatch)
    path = tmp_path / "f"
    path.write_bytes(b"abcd")
    _fsync_file(path)
    assert lose_unsynced_data(tmp_path, synced, 0.5) == []
    with path.open("ab") as f:
        f.write(b"efgh")
    assert lose_unsynced_data(tmp_path, synced, 0.5) == [path]
    assert path.read_bytes() == b"abcd"
