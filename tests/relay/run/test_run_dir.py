"""Run directories: generated names get a suffix, chosen names are never reused, resume needs a manifest."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay.run.run_dir import RunDirError, create_run_dir, open_run_dir_for_resume


def test_generated_name_collision_gets_suffix(tmp_path: Path) -> None:
    out = tmp_path / "outputs"  # created on demand
    first = create_run_dir(out, "default-20250101-120000", explicit=False)
    second = create_run_dir(out, "default-20250101-120000", explicit=False)
    third = create_run_dir(out, "default-20250101-120000", explicit=False)
    assert [p.name for p in (first, second, third)] == [
        "default-20250101-120000",
        "default-20250101-120000-1",
        "default-20250101-120000-2",
    ]
    assert all(p.is_dir() and not any(p.iterdir()) for p in (first, second, third))


def test_generated_name_skips_taken_suffixes(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run-1").mkdir()
    assert create_run_dir(tmp_path, "run", explicit=False) == tmp_path / "run-2"


def test_explicit_name_is_refused_when_taken(tmp_path: Path) -> None:
    existing = create_run_dir(tmp_path, "my-run", explicit=True)
    (existing / "metrics.jsonl").write_text('{"step": 0}\n')
    with pytest.raises(RunDirError) as info:
        create_run_dir(tmp_path, "my-run", explicit=True)
    message = str(info.value)
    assert "trainer.run_name='my-run'" in message
    assert str(existing) in message
    assert "--resume" in message and "to continue it, or pick another trainer.run_name" in message
    assert (existing / "metrics.jsonl").read_text() == '{"step": 0}\n'  # untouched


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../escape"])
def test_bad_run_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(RunDirError, match="trainer.run_name"):
        create_run_dir(tmp_path, name, explicit=True)


def test_open_for_resume(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="no such directory"):
        open_run_dir_for_resume(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunDirError, match="not a directory"):
        open_run_dir_for_resume(tmp_path / "file")
    run = create_run_dir(tmp_path, "r", explicit=True)
    with pytest.raises(RunDirError, match=r"not a Relay run directory \(no manifest.json\)"):
        open_run_dir_for_resume(run)
    (run / "manifest.json").write_text("{}")
    assert open_run_dir_for_resume(run) == run
