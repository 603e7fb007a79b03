"""Where checkpoints live in a run directory, and how one is written so a half-written one never counts.

Layout::

    outputs/<run>/checkpoints/step_000004/      # state after 4 finished training steps
        learner/policy.safetensors               # params under HF names
        learner/optimizer.safetensors + .json    # optimizer state leaves by tree path, and the sidecar
        learner/learner.json                     # optimizer step count, skip counters
        driver.json                              # next step, data cursor, seed, config fingerprint
        metrics.jsonl                            # the metrics history up to this step
        hf/                                      # the policy as an HF checkpoint (trainer.export_hf)
        inflight/                                # trainer.max_staleness >= 1: the batches collected for the
                                                 # steps after it (relay/checkpoint/batch_io.py)

A checkpoint is first written to ``checkpoints/.tmp-step_000004-<pid>`` and then renamed into
place (``os.rename`` is atomic on one filesystem): a crash mid-write leaves only a ``.tmp-``
directory, which is never picked up and is cleaned on the next save.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

INFLIGHT_DIR = "inflight"
STEP_DIR = re.compile(r"^step_(\d{6,})$")
# File names that mean a pickle (torch's .bin/.pt/.pth are pickles too), and the first bytes of a pickle of
# protocol 2 to 5 (the PROTO opcode), which catch one under any other name. Formats read by parsers that run no
# code are not looked into (a safetensors header length can start with those bytes).
PICKLE_SUFFIXES = (".pkl", ".pickle", ".pt", ".pth", ".bin", ".ckpt", ".joblib")
PICKLE_HEADERS = tuple(bytes([0x80, protocol]) for protocol in range(2, 6))
SAFE_SUFFIXES = (".safetensors", ".json", ".jsonl", ".txt", ".yaml", ".md", ".jinja")


class CheckpointError(RuntimeError):
    """No usable checkpoint where one was asked for; the message says what was looked at."""


def checkpoint_path(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"step_{step:06d}"


def list_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints of a run, oldest first (``.tmp-`` leftovers are ignored)."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := STEP_DIR.match(p.name))]
    return sorted(found)


def latest_checkpoint(run_dir: Path) -> Path | None:
    found = list_checkpoints(run_dir)
    return found[-1][1] if found else None


def write_atomically(final: Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp_dir)`` then rename ``tmp_dir`` to ``final``; stale temp dirs are removed first."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    for stale in final.parent.glob(f".tmp-{final.name}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    tmp.mkdir()
    try:
        write(tmp)
        if final.exists():  # the same step saved again (e.g. the end-of-run save after a periodic one)
            shutil.rmtree(final)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def prune_checkpoints(run_dir: Path, keep: int) -> list[Path]:
    """Delete all but the ``keep`` newest checkpoints (``keep=0``: keep all); returns what was deleted."""
    found = list_checkpoints(run_dir)
    if keep <= 0 or len(found) <= keep:
        return []
    doomed = [p for _, p in found[:-keep]]
    for p in doomed:
        shutil.rmtree(p)
    return doomed


def pickled_files(checkpoint: Path) -> list[Path]:
    """The files under ``checkpoint`` that are pickles, by name or by their first bytes.

    A Relay checkpoint holds safetensors, JSON and text only; unpickling a file runs whatever code its author put
    in it, so a checkpoint someone else wrote must not be read that way."""
    found = []
    for path in sorted(Path(checkpoint).rglob("*")):
        suffix = path.suffix.lower()
        if not path.is_file() or suffix in SAFE_SUFFIXES:
            continue
        with path.open("rb") as f:
            head = f.read(2)
        if suffix in PICKLE_SUFFIXES or head in PICKLE_HEADERS:
            found.append(path)
    return found


def refuse_pickles(checkpoint: Path) -> None:
    """Raise :class:`CheckpointError` naming the pickled files of ``checkpoint`` (see :func:`pickled_files`)."""
    found = pickled_files(checkpoint)
    if found:
        names = ", ".join(str(p.relative_to(checkpoint)) for p in found[:3])
        raise CheckpointError(
            f"{checkpoint} holds {len(found)} pickled file(s) ({names}): loading a pickle runs whatever code it "
            "names, so Relay never resumes from one. Its checkpoints are safetensors and JSON only; resume from a "
            "checkpoint written by this version of Relay"
        )


def resolve_resume(target: Path) -> tuple[Path, Path]:
    """``(run_dir, checkpoint_dir)`` for ``--resume TARGET``: a run directory (its newest checkpoint)
    or one checkpoint directory inside ``<run>/checkpoints/``. A checkpoint holding a pickle is refused
    (:func:`refuse_pickles`)."""
    target = Path(target)
    if STEP_DIR.match(target.name) and target.parent.name == "checkpoints":
        if not (target / "driver.json").is_file():
            raise CheckpointError(f"{target} is not a complete checkpoint (no driver.json)")
        refuse_pickles(target)
        return target.parent.parent, target
    if not target.is_dir():
        raise CheckpointError(f"--resume {target}: no such run directory or checkpoint")
    latest = latest_checkpoint(target)
    if latest is None:
        raise CheckpointError(
            f"--resume {target}: the run has no checkpoint yet (trainer.save_final writes one when a run ends, "
            "trainer.save_freq: N one every N steps); "
            f"looked in {target / 'checkpoints'}"
        )
    refuse_pickles(latest)
    return target, latest
