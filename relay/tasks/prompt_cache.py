"""The token ids of a run's rendered prompts, kept on disk so that a run on the same prompts starts without rendering
and tokenising them again (and without importing transformers in the driver, when every split hits).

A cache entry is addressed by the SHA-256 of everything the ids depend on: the bytes of every tokenizer and
chat-template file in the model's directory (weights excepted), each example as read (uid, question, ground truth,
source: its ``repr``), the ``data`` config section, the source of Relay's task and data modules (which build the
prompt), and the installed transformers, tokenizers and jinja2 versions. Any change to any of them is another
address, so an entry is never read for prompts it was not made from. An entry is a NumPy ``.npz`` of two integer
arrays read with ``allow_pickle=False`` (nothing in it can run code); one whose shapes do not match its examples is
ignored and written again. Entries live under ``$RELAY_HOME/prompt-cache`` (at most :data:`CACHE_MAX_BYTES`, the
oldest removed first); ``data.cache_prompts=false`` turns the cache off.

Measured on a 2-core AMD EPYC (2026-12-03): GSM8K's 7,473 training prompts render in ~0.65 s and tokenise in ~0.7 s,
and importing transformers' ``AutoTokenizer`` in a fresh driver costs ~4.8 CPU-seconds (it imports torch); reading
the same prompts' entry (~3 MB) takes milliseconds.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from relay.repo import relay_home

CACHE_MAX_BYTES = 1024**3
# Files of a model directory that hold weights, not the tokenizer or its chat template.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".msgpack", ".h5", ".npz")
# Relay's modules whose code decides a prompt's text (relative to the relay package).
PROMPT_CODE = ("tasks", "data")
VERSIONED = ("transformers", "tokenizers", "jinja2")


class LazyTokenizer:
    """``AutoTokenizer.from_pretrained(path)``, loaded at its first use: a run whose prompts all come from the cache
    never imports transformers in the driver.

    >>> tok = LazyTokenizer("/nonexistent")
    >>> tok.loaded, tok.path
    (False, PosixPath('/nonexistent'))
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._tokenizer: Any = None

    @property
    def loaded(self) -> bool:
        return self._tokenizer is not None

    def get(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(str(self.path))
        return self._tokenizer

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.get()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.get(), name)


def _file_digest(path: Path) -> str:
    # relay.run.manifest's sha256_file sits above relay.tasks in the layers (tests/test_layering.py); these files are
    # a tokenizer's and a few source files, small enough to read whole.
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tokenizer_files_digest(model_dir: Path) -> str:
    """SHA-256 over the names and bytes of the directory's files that are not weights (the tokenizer, its config, the
    chat template, the model config)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(model_dir).iterdir() if p.is_file()):
        if not path.name.endswith(WEIGHT_SUFFIXES):
            digest.update(f"{path.name}\0{_file_digest(path)}\0".encode())
    return digest.hexdigest()


def prompt_code_digest() -> str:
    """SHA-256 over the source of Relay's modules that build a prompt's text."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for part in PROMPT_CODE:
        for path in sorted((package / part).glob("*.py")):
            digest.update(f"{part}/{path.name}\0{_file_digest(path)}\0".encode())
    return digest.hexdigest()


def _versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in VERSIONED:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def cache_key(model_dir: Path, examples: Sequence[Any], data_section: Any, split: str) -> str:
    """The entry's address: the SHA-256 of everything the ids depend on (see the module docstring)."""
    rows = hashlib.sha256()
    for example in examples:
        rows.update(repr(example).encode())
        rows.update(b"\0")
    parts = {
        "format": 1,
        "split": split,
        "tokenizer": tokenizer_files_digest(model_dir),
        "examples": rows.hexdigest(),
        "data": repr(data_section),
        "code": prompt_code_digest(),
        "versions": _versions(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def cache_dir(environ: dict[str, str] | None = None) -> Path:
    return relay_home(environ) / "prompt-cache"


def read_entry(path: Path, count: int) -> list[list[int]] | None:
    """The ids of ``count`` prompts stored at ``path``; None when it is missing, unreadable or not ``count``
    prompts' ids."""
    try:
        with np.load(path, allow_pickle=False) as entry:
            lengths, ids = entry["lengths"], entry["ids"]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    if lengths.ndim != 1 or ids.ndim != 1 or len(lengths) != count or int(lengths.sum()) != len(ids):
        return None
    if len(lengths) and int(lengths.min()) < 0:
        return None
    ends = np.cumsum(lengths)
    return [ids[end - n : end].tolist() for n, end in zip(lengths.tolist(), ends.tolist(), strict=True)]


def write_entry(path: Path, encoded: Sequence[Sequence[int]]) -> None:
    """Store ``encoded`` at ``path`` atomically (a temporary file renamed over it), then keep the directory under
    :data:`CACHE_MAX_BYTES`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lengths = np.array([len(ids) for ids in encoded], dtype=np.int64)
    flat = np.fromiter((t for ids in encoded for t in ids), dtype=np.int32, count=int(lengths.sum()))  # ids < 2**31
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}.npz")
    np.savez(tmp, lengths=lengths, ids=flat)
    os.replace(tmp, path)
    _evict(path.parent, CACHE_MAX_BYTES)


def _evict(directory: Path, max_bytes: int) -> None:
    entries = []
    for p in directory.glob("*.npz"):
        try:
            stat = p.stat()
        except OSError:  # removed by another process meanwhile
            continue
        entries.append((stat.st_mtime, stat.st_size, p))
    total = sum(size for _, size, _ in entries)
    for _, size, p in sorted(entries, key=lambda e: e[0]):
        if total <= max_bytes:
            break
        p.unlink(missing_ok=True)
        total -= size


def cached_encode(
    tokenizer: Any,
    examples: Sequence[Any],
    data_section: Any,
    split: str,
    encode: Callable[[], list[list[int]]],
) -> list[list[int]]:
    """``encode()`` (render and tokenise ``examples``), through the cache when ``tokenizer`` is a
    :class:`LazyTokenizer` on a model directory and ``data.cache_prompts`` is on; else ``encode()`` itself."""
    if not data_section.cache_prompts or not isinstance(tokenizer, LazyTokenizer) or not tokenizer.path.is_dir():
        return encode()
    path = cache_dir() / f"{cache_key(tokenizer.path, examples, data_section, split)}.npz"
    hit = read_entry(path, len(examples))
    if hit is not None:
        os.utime(path)  # recently used: kept longest by the eviction
        return hit
    encoded = [list(ids) for ids in encode()]
    with contextlib.suppress(OSError):  # a read-only or full RELAY_HOME: the run goes on uncached
        write_entry(path, encoded)
    return encoded
