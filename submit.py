"""Submit a Relay run to a Ray cluster with ``ray job submit``, its provenance and its name attached.

    python submit.py [--address http://127.0.0.1:8265] [--name NAME] [--no-wait] \\
        -- python trainer.py --config configs/tiny.yaml [--set key=value ...]

It runs ``ray job submit --working-dir .`` from this directory and adds what the upload would lose:

* ``--submission-id relay-<run name>`` and ``--metadata-json {"job_name": <run name>, ...}``: the dashboard's Jobs
  page shows the run's name, and ``ray job logs relay-<run name>`` finds it;
* environment variables for the job (``relay/run/job.py``): ``RELAY_RUN_NAME`` (``trainer.run_name``),
  ``RELAY_SUBMIT_DIR`` (this directory: a relative ``trainer.output_dir`` is resolved here, not in Ray's
  temporary copy of the working dir) and ``RELAY_SUBMIT_GIT`` (this checkout's commit, branch and dirty
  files, read before the upload drops ``.git``; the run's ``manifest.json`` records them).

The run name is ``--name``, else the entrypoint's ``--set trainer.run_name=...``, else ``<preset>-<UTC time>`` as
``trainer.py`` names runs. Exit code: ``ray job submit``'s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from relay.run.job import SUBMIT_DIR_ENV, SUBMIT_GIT_ENV


def run_name_for(entrypoint: Sequence[str], name: str | None, now: datetime) -> str:
    """``name``, else the entrypoint's ``trainer.run_name`` override, else ``<preset stem>-<YYYYmmdd-HHMMSS>``.

    >>> run_name_for(["python", "trainer.py", "--config", "configs/tiny.yaml"], None, datetime(2026, 1, 2, 3, 4, 5))
    'tiny-20260102-030405'
    >>> run_name_for(["python", "trainer.py", "--set", "trainer.run_name=exp1"], None, datetime(2026, 1, 2))
    'exp1'
    """
    if name:
        return name
    args = list(entrypoint)
    preset = "default"
    for i, arg in enumerate(args):
        value = args[i + 1] if i + 1 < len(args) else ""
        if arg == "--set" and value.startswith("trainer.run_name="):
            return value.split("=", 1)[1]
        if arg.startswith("--set=trainer.run_name="):
            return arg.split("=", 2)[2]
        if arg == "--config" and value:
            preset = Path(value).stem
        elif arg.startswith("--config="):
            preset = Path(arg.split("=", 1)[1]).stem
    return f"{preset}-{now:%Y%m%d-%H%M%S}"


def submit_command(
    entrypoint: Sequence[str],
    run_name: str,
    git: dict[str, Any],
    submit_dir: Path,
    address: str | None = None,
    no_wait: bool = False,
    ray: str = "ray",
) -> list[str]:
    """The ``ray job submit`` command line for ``entrypoint`` with Relay's name, metadata and environment."""
    env_vars = {
        "RELAY_RUN_NAME": run_name,
        SUBMIT_DIR_ENV: str(submit_dir),
        SUBMIT_GIT_ENV: json.dumps(git, sort_keys=True),
    }
    metadata = {
        "job_name": run_name,
        "relay_run_name": run_name,
        "relay_git_commit": str(git.get("commit", "unknown")),
        "relay_git_dirty": str(git.get("dirty", "unknown")),
    }
    cmd = [ray, "job", "submit"]
    if address:
        cmd += ["--address", address]
    cmd += ["--working-dir", str(submit_dir), "--submission-id", f"relay-{run_name}"]
    cmd += ["--metadata-json", json.dumps(metadata), "--runtime-env-json", json.dumps({"env_vars": env_vars})]
    if no_wait:
        cmd.append("--no-wait")
    return [*cmd, "--", *entrypoint]


def main(argv: Sequence[str] | None = None) -> int:
    from relay.run.manifest import git_info

    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("usage: python submit.py [options] -- python trainer.py [trainer options]", file=sys.stderr)
        return 2
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="submit.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", default=None, help="the dashboard's address (default: RAY_ADDRESS, as ray job)")
    parser.add_argument("--name", default=None, help="the run's name (trainer.run_name and the job's name)")
    parser.add_argument("--no-wait", action="store_true", help="return once the job is submitted")
    args = parser.parse_args(argv[:split])
    entrypoint = argv[split + 1 :]
    if not entrypoint:
        print("submit.py: nothing after --; e.g. -- python trainer.py --config configs/tiny.yaml", file=sys.stderr)
        return 2
    submit_dir = Path.cwd().resolve()
    run_name = run_name_for(entrypoint, args.name, datetime.now(UTC))
    git = git_info(submit_dir)
    ray = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
    cmd = submit_command(entrypoint, run_name, git, submit_dir, args.address, args.no_wait, ray)
    dirty = {True: ", uncommitted changes", False: "", "unknown": ", dirty state unknown"}.get(git.get("dirty"), "")
    print(
        f"submitting run {run_name} as job relay-{run_name} (git {git.get('commit', 'unknown')[:12]}{dirty}); "
        f"a relative trainer.output_dir resolves under {submit_dir}",
        file=sys.stderr,
        flush=True,
    )
    return subprocess.call(cmd, env=os.environ.copy())


if __name__ == "__main__":
    sys.exit(main())
