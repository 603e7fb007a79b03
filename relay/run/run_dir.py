"""One directory per run under ``trainer.output_dir``, never reused by a new run."""

from __future__ import annotations

from pathlib import Path

MANIFEST_NAME = "manifest.json"


class RunDirError(Exception):
    """The run directory cannot be created or opened; the message says why and what to do."""


def create_run_dir(output_dir: Path, run_name: str, explicit: bool) -> Path:
    """Create and return a new, empty run directory ``output_dir/run_name``.

    A directory is never reused by a new run. With a generated name (``explicit=False``) a name that is
    taken gets the first free suffix ``-1``, ``-2``, …; the returned path's ``.name`` is then the run's
    name. With a name the user chose (``explicit=True``, ``trainer.run_name``) an existing directory is
    refused with a ``RunDirError``. Creation is atomic (``mkdir`` without ``exist_ok``), so two runs
    started at the same second cannot share a directory.

    Example: with ``outputs/default-20250101-120000`` taken, ``create_run_dir(Path("outputs"),
    "default-20250101-120000", explicit=False)`` returns ``outputs/default-20250101-120000-1``.
    """
    _check_name(run_name)
    output_dir = Path(output_dir)
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunDirError(f"trainer.output_dir={str(output_dir)!r}: cannot create it: {exc}") from exc
    path = output_dir / run_name
    if explicit:
        try:
            path.mkdir()
        except FileExistsError:
            raise RunDirError(
                f"trainer.run_name={run_name!r}: {path} already exists and a run directory is never reused: "
                f"use --resume {path} to continue it, or pick another trainer.run_name"
            ) from None
        return path
    for suffix in range(0, 10_000):
        candidate = path if suffix == 0 else output_dir / f"{run_name}-{suffix}"
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise RunDirError(f"{output_dir}: no free run directory name {run_name}-N for N < 10000")


def open_run_dir_for_resume(path: Path) -> Path:
    """Check that ``path`` is an existing Relay run directory (it has ``manifest.json``); return it.

    Raises ``RunDirError`` naming the path when it does not exist, is not a directory, or has no manifest.
    """
    path = Path(path)
    if not path.exists():
        raise RunDirError(f"--resume {path}: no such directory")
    if not path.is_dir():
        raise RunDirError(f"--resume {path}: not a directory (pass the run directory, e.g. outputs/<run name>)")
    if not (path / MANIFEST_NAME).is_file():
        raise RunDirError(
            f"--resume {path}: not a Relay run directory (no {MANIFEST_NAME}); "
            "pass the directory a run wrote, e.g. outputs/<run name>"
        )
    return path


def _check_name(run_name: str) -> None:
    """A run name is one path component: not empty, no separators, not ``.`` or ``..``."""
    if not run_name or run_name in {".", ".."} or "/" in run_name or "\\" in run_name or "\0" in run_name:
        raise RunDirError(
            f"trainer.run_name={run_name!r}: a run name must be one directory name (no '/', not empty, not '.' or '..')"
        )
