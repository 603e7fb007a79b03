"""The trainer's command line: what ``--resume`` resolves to."""

from __future__ import annotations

from pathlib import Path

import pytest

from driver.cli import parse_args, resume_target
from relay.checkpoint.store import checkpoint_path, write_atomically


def test_a_relative_resume_path_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The learner opens the checkpoint in its own working directory, not the driver's: ``--resume outputs/r`` must
    reach it as an absolute path (a relative one failed there with FileNotFoundError)."""
    run = tmp_path / "outputs" / "r"
    write_atomically(checkpoint_path(run, 2), lambda d: (d / "driver.json").write_text("{}"))
    (run / "config.yaml").write_text("{}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAY_JOB_CONFIG_JSON_ENV_VAR", raising=False)
    preset, checkpoint, run_dir = resume_target(parse_args(["--resume", "outputs/r"]))
    assert run_dir == run and run_dir.is_absolute()
    assert checkpoint == checkpoint_path(run, 2) and preset == str(run / "config.yaml")
