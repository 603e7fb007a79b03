"""submit.py: the run's name, the job's id and metadata, and the provenance passed to the job."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import submit
from submit import submit_command


def test_docstring_examples() -> None:
    result = doctest.testmod(submit)
    assert result.attempted > 0 and result.failed == 0


def test_the_command_names_the_job_and_carries_the_checkouts_state(tmp_path: Path) -> None:
    git = {"commit": "0123456789abcdef", "branch": "main", "dirty": False, "dirty_files": []}
    entry = ["python", "trainer.py", "--config", "configs/tiny.yaml"]
    cmd = submit_command(entry, "tiny-1", git, tmp_path, address="http://127.0.0.1:8265", ray="ray")
    split = cmd.index("--")
    assert cmd[:3] == ["ray", "job", "submit"] and cmd[split + 1 :] == entry
    options = dict(zip(cmd[3:split:2], cmd[4:split:2], strict=True))
    assert options["--address"] == "http://127.0.0.1:8265" and options["--working-dir"] == str(tmp_path)
    assert options["--submission-id"] == "relay-tiny-1"
    metadata = json.loads(options["--metadata-json"])
    assert metadata["job_name"] == "tiny-1" and metadata["relay_git_commit"] == git["commit"]
    env = json.loads(options["--runtime-env-json"])["env_vars"]
    assert env["RELAY_RUN_NAME"] == "tiny-1" and env["RELAY_SUBMIT_DIR"] == str(tmp_path)
    assert json.loads(env["RELAY_SUBMIT_GIT"]) == git


def test_without_an_entrypoint_it_says_how(capsys) -> None:
    assert submit.main(["--name", "x"]) == 2
    assert "-- python trainer.py" in capsys.readouterr().err
