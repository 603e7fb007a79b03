"""Where a run's directory and provenance come from under ``ray job submit``.

``ray job submit --working-dir .`` uploads a copy of the checkout without ``.git`` and starts ``trainer.py``
inside Ray's temporary copy of it, so a relative ``trainer.output_dir`` would land in that copy and the
manifest could not name the commit. ``submit.py`` (beside ``trainer.py``) captures both before the upload and
passes them to the job as environment variables:

* ``RELAY_SUBMIT_DIR``: the absolute directory the user submitted from; a relative ``trainer.output_dir`` is
  resolved against it when it exists on the driver's node (the same machine, or a shared filesystem);
* ``RELAY_SUBMIT_GIT``: the submitting checkout's ``git_info`` as JSON (commit, branch, dirty state);
* ``RELAY_RUN_NAME``: the run's name (a config environment variable for ``trainer.run_name``), also the job's
  ``job_name`` on the dashboard's Jobs page.

Without them, a job's relative ``trainer.output_dir`` goes under ``$RELAY_HOME`` (:func:`relay.repo.relay_home`,
default ``~/.cache/relay``), never into Ray's temporary copy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from relay.repo import relay_home

SUBMIT_DIR_ENV = "RELAY_SUBMIT_DIR"
SUBMIT_GIT_ENV = "RELAY_SUBMIT_GIT"
# Set by Ray's job supervisor for the entrypoint of a submitted job (its runtime env and metadata).
RAY_JOB_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"


def under_ray_job(environ: Mapping[str, str]) -> bool:
    """True in the entrypoint of a ``ray job submit`` job."""
    return RAY_JOB_ENV in environ


def resolve_output_dir(output_dir: str | Path, environ: Mapping[str, str], cwd: Path) -> Path:
    """The absolute directory for ``trainer.output_dir``.

    An absolute path stays. A relative one is resolved against ``cwd`` outside a job; under a job against
    ``RELAY_SUBMIT_DIR`` when that directory exists here, else against ``$RELAY_HOME`` (default ``~/.cache/relay``).

    Worked example: ``resolve_output_dir("outputs", {"RAY_JOB_CONFIG_JSON_ENV_VAR": "{}", "RELAY_SUBMIT_DIR":
    "/home/me/relay"}, Path("/tmp/ray/session/runtime_resources/working_dir_files/x"))`` ->
    ``Path("/home/me/relay/outputs")`` when ``/home/me/relay`` exists on the driver's node.
    """
    path = Path(output_dir).expanduser()
    if path.is_absolute():
        return path
    if not under_ray_job(environ):
        return (Path(cwd) / path).resolve()
    submit_dir = environ.get(SUBMIT_DIR_ENV)
    if submit_dir and Path(submit_dir).is_absolute() and Path(submit_dir).is_dir():
        return Path(submit_dir) / path
    return relay_home(environ) / path


def submitted_git(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The submitting checkout's git state from ``RELAY_SUBMIT_GIT`` (with ``"source": "submitted checkout"``),
    or None when the variable is absent or not a JSON object (the caller then reads the local checkout)."""
    raw = environ.get(SUBMIT_GIT_ENV)
    if not raw:
        return None
    try:
        info = json.loads(raw)
    except ValueError:
        return None
    return {**info, "source": "submitted checkout"} if isinstance(info, dict) else None
