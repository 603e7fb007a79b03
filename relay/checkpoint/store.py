"""Where checkpoints live in a run directory, and how one is written so a half-written one never counts.

Layout::

    outputs/<run>/checkpoints/step_000004/      # state after 4 finished training steps
        learner/policy.safetensors               # params under HF names
        learner/optimizer.safetensors + .json    # optimizer state leaves by tree path, and the sidecar
        learner/learner.json                     # optimizer step count, skip counters
        driver.json                              # next step, data cursor, seed, config fingerprint
        metrics.jsonl                            # the metrics history up to this step
        hf/                                      # the policy as an HF checkpoint (trainer.export_hf)

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

STEP_DIR = re.compile(r"^step_(\d{6,})$")


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


def resolve_resume(target: Path) -> tuple[Path, Path]:
    """``(run_dir, checkpoint_dir)`` for ``--resume TARGET``: a run directory (its newest checkpoint)
    or one checkpoint directory inside ``<run>/checkpoints/``."""
    target = Path(target)
    if STEP_DIR.match(target.name) and target.parent.name == "checkpoints":
        if not (target / "driver.json").is_file():
            raise CheckpointError(f"{target} is not a complete checkpoint (no driver.json)")
        return target.parent.parent, target
    if not target.is_dir():
        raise CheckpointError(f"--resume {target}: no such run directory or checkpoint")
    latest = latest_checkpoint(target)
    if latest is None:
        raise CheckpointError(
            f"--resume {target}: the run has no checkpoint yet (set trainer.save_freq to save them); "
            f"looked in {target / 'checkpoints'}"
        )
    return target, latest
