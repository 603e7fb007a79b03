"""Under ray job submit a run's directory is absolute and outside Ray's copy of the working dir; the submitting
checkout's git state reaches the manifest."""

from __future__ import annotations

import json
from pathlib import Path

from relay.run.job import RAY_JOB_ENV, resolve_output_dir, submitted_git

JOB = {RAY_JOB_ENV: "{}"}
RAY_COPY = Path("/tmp/ray/session_x/runtime_resources/working_dir_files/_ray_pkg_abc")


def test_outside_a_job_a_relative_dir_is_the_working_directorys(tmp_path: Path) -> None:
    assert resolve_output_dir("outputs", {}, tmp_path) == tmp_path / "outputs"
    assert resolve_output_dir(tmp_path / "abs", JOB, RAY_COPY) == tmp_path / "abs"


def test_in_a_job_a_relative_dir_resolves_where_the_user_submitted(tmp_path: Path) -> None:
    assert resolve_output_dir("outputs", {**JOB, "RELAY_SUBMIT_DIR": str(tmp_path)}, RAY_COPY) == tmp_path / "outputs"


def test_in_a_job_without_the_submit_dir_here_it_goes_under_relay_home(tmp_path: Path) -> None:
    gone = str(tmp_path / "laptop-checkout")  # submitted from another machine: not on the driver's node
    env = {**JOB, "RELAY_SUBMIT_DIR": gone, "RELAY_HOME": str(tmp_path / "home")}
    assert resolve_output_dir("outputs", env, RAY_COPY) == tmp_path / "home" / "outputs"
    path = resolve_output_dir("outputs", JOB, RAY_COPY)
    assert path == Path.home() / ".cache" / "relay" / "outputs"
    assert RAY_COPY not in path.parents


def test_submitted_git_is_read_from_the_environment() -> None:
    info = {"commit": "abc123", "branch": "main", "dirty": True, "dirty_files": ["trainer.py"]}
    assert submitted_git({"RELAY_SUBMIT_GIT": json.dumps(info)}) == {**info, "source": "submitted checkout"}
    assert submitted_git({}) is None
    assert submitted_git({"RELAY_SUBMIT_GIT": "not json"}) is None
    assert submitted_git({"RELAY_SUBMIT_GIT": "[1]"}) is None
