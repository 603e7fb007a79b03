"""A checkpoint's record of its own files, and the check that its files are still those.

The last thing a save writes into a checkpoint's temporary directory, before the rename that makes it count, is
``checkpoint_manifest.json``: every other file's path, size and SHA-256. Resuming checks the directory against it,
so a checkpoint whose files were cut short, changed on disk or deleted is refused with its path and the reason,
instead of loading weights that are not what was saved (a truncated safetensors file can fail late or, cut at a
tensor boundary, load wrong values without an error).

Worked example: a checkpoint with ``driver.json`` (120 bytes) and ``learner/policy.safetensors``; the manifest says
``{"files": {"driver.json": {"bytes": 120, "sha256": "9f…"}, "learner/policy.safetensors": {...}}}``. Truncate the
safetensors file and :func:`problem` answers ``"learner/policy.safetensors has 1048576 bytes, the manifest says
269060552 (cut short or overwritten)"``; flip one byte and it answers ``"learner/policy.safetensors: its SHA-256
differs from the manifest's (changed on disk)"``.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

MANIFEST = "checkpoint_manifest.json"
CHUNK = 1 << 22  # bytes read at a time while hashing (4 MiB)
# Files hashed at once: hashlib releases the GIL while it hashes more than 2047 bytes at a time (the Python 3.11
# hashlib documentation, "hash algorithms"), so threads hash a checkpoint's files on as many cores.
HASH_THREADS = min(8, os.cpu_count() or 1)


def file_digest(path: Path) -> str:
    """The SHA-256 of ``path``'s bytes, as hex."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _digests(paths: list[Path]) -> list[str]:
    with ThreadPoolExecutor(HASH_THREADS) as pool:
        return list(pool.map(file_digest, paths))


def _files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.name != MANIFEST)


def write_manifest(directory: Path) -> Path:
    """Record every file under ``directory`` (its path relative to it, bytes, SHA-256) in ``directory/MANIFEST``."""
    directory = Path(directory)
    paths = _files(directory)
    digests = _digests(paths)
    files = {
        str(p.relative_to(directory)): {"bytes": p.stat().st_size, "sha256": digest}
        for p, digest in zip(paths, digests, strict=True)
    }
    path = directory / MANIFEST
    path.write_text(json.dumps({"files": files}, indent=1, sort_keys=True))
    return path


def read_manifest(directory: Path) -> dict[str, dict] | None:
    """The manifest's files, or None when the checkpoint has none (a checkpoint written before manifests)."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        return None
    return json.loads(path.read_text())["files"]


def problem(directory: Path) -> str | None:
    """Why ``directory``'s files are not the ones its manifest records (the first difference found), or None.

    Sizes are compared first (cheap, and they catch a cut-short write), then digests. A checkpoint without a
    manifest has nothing to compare against: None (its other checks still apply: driver.json, no pickles)."""
    directory = Path(directory)
    try:
        recorded = read_manifest(directory)
    except (OSError, ValueError, KeyError) as exc:
        return f"{MANIFEST} is unreadable ({type(exc).__name__}: {exc})"
    if recorded is None:
        return None
    for name, entry in recorded.items():
        path = directory / name
        if not path.is_file():
            return f"{name} is missing (the manifest lists it)"
        size = path.stat().st_size
        if size != entry["bytes"]:
            return f"{name} has {size} bytes, the manifest says {entry['bytes']} (cut short or overwritten)"
    names = list(recorded)
    for name, digest in zip(names, _digests([directory / n for n in names]), strict=True):
        if digest != recorded[name]["sha256"]:
            return f"{name}: its SHA-256 differs from the manifest's (changed on disk)"
    return None
