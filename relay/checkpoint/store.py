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

A checkpoint is first written to ``checkpoints/.tmp-step_000004-<pid>``, its files recorded in
``checkpoint_manifest.json`` (relay/checkpoint/integrity.py), and then renamed into place (``os.rename`` is
atomic on one filesystem): a crash mid-write leaves only a ``.tmp-`` directory, which is never picked up and is
cleaned on the next save. A step saved again (an emergency checkpoint of the step a resumed run began with) swaps
directories by two renames, the old one first moved to ``.replaced-step_000004-<pid>``; a crash between the renames
leaves that complete copy, which the next save or ``--resume`` moves back (:func:`restore_replaced`). Resuming
checks the files against the manifest; a checkpoint that fails is refused with the reason, and a run directory
resumes from its newest checkpoint that passes.

The rename is atomic but, on its own, not durable: every file and directory of the temporary directory is fsynced
before it, and ``checkpoints/`` after it (:func:`fsync_tree`), so a power loss cannot leave a published checkpoint
whose file data never reached the disk.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

from relay.checkpoint.integrity import problem, write_manifest
from relay.faults import fault_point

INFLIGHT_DIR = "inflight"
REPLACED_PREFIX = ".replaced-"
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
    restore_replaced(final.parent)
    for stale in final.parent.glob(f".tmp-{final.name}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    tmp.mkdir()
    try:
        write(tmp)
        write_manifest(tmp)  # last: a checkpoint whose manifest is missing or wrong was cut short or changed
        fsync_tree(tmp)  # every byte on disk before the rename publishes it (see fsync_tree)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if not final.exists():
        os.rename(tmp, final)
        fsync_dir(final.parent)
        return final
    # The same step saved again: never a moment without a complete copy under one of the two names.
    aside = final.parent / f"{REPLACED_PREFIX}{final.name}-{os.getpid()}"
    os.rename(final, aside)
    step = STEP_DIR.match(final.name)
    fault_point("checkpoint.replace", int(step.group(1)) if step else -1)  # the window between the renames
    os.rename(tmp, final)
    fsync_dir(final.parent)
    shutil.rmtree(aside, ignore_errors=True)
    return final


def fsync_tree(root: Path) -> None:
    """fsync every regular file and every directory under ``root``: a directory after its files and subdirectories
    (bottom-up), ``root`` last.

    Publishing a directory by ``os.rename`` is atomic but not durable on its own: Linux's fsync(2) says that
    fsync of a file "does not necessarily ensure that the entry in the directory containing the file has also reached
    disk", for which the directory needs its own fsync, and with delayed allocation (ext4, xfs) a file's blocks may
    be written back long after a rename that was already committed. ext4's ``auto_da_alloc`` forces the blocks out
    only for a file renamed over an existing file or truncated, not for a new directory renamed into place. Without
    these fsyncs a power loss can leave ``step_N`` published with empty or cut-short files. Files are opened
    read-only: the learner actor, another process, wrote most of them, and fsync flushes the file, not a descriptor.
    Symlinks and special files are left alone (a link's entry is covered by its directory's fsync)."""
    for dirpath, _, filenames in os.walk(root, topdown=False, onerror=_raise):
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(dirpath))


def fsync_dir(path: Path) -> None:
    """fsync the directory ``path``, which makes the names created, renamed or removed in it durable.

    Some filesystems cannot fsync a directory and answer EINVAL (or EBADF for a read-only descriptor); that is
    ignored, as PostgreSQL does (``fsync_fname_ext`` in src/backend/storage/file/fd.c): nothing more can be done
    there. Any other error is raised."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _raise(exc: OSError) -> None:
    raise exc


def restore_replaced(checkpoints_dir: Path) -> list[Path]:
    """Finish a swap a crash interrupted: a ``.replaced-step_N-<pid>`` copy goes back to ``step_N`` when that name is
    free (the new copy never arrived), else it is deleted (the new copy did). Returns the checkpoints put back."""
    restored = []
    for aside in sorted(Path(checkpoints_dir).glob(f"{REPLACED_PREFIX}step_*-*")):
        final = aside.with_name(aside.name[len(REPLACED_PREFIX) :].rsplit("-", 1)[0])
        if final.exists():
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.rename(aside, final)
            restored.append(final)
    return restored


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


def checkpoint_problem(checkpoint: Path) -> str | None:
    """Why ``checkpoint`` cannot be resumed from (no ``driver.json``, or files that differ from its manifest), or
    None. Pickles are refused separately, always (:func:`refuse_pickles`): they are not damage but a hazard."""
    if not (Path(checkpoint) / "driver.json").is_file():
        return "no driver.json (not a complete checkpoint)"
    return problem(checkpoint)


def newest_usable_checkpoint(run_dir: Path) -> tuple[Path | None, list[tuple[Path, str]]]:
    """The newest checkpoint of ``run_dir`` that :func:`checkpoint_problem` passes, and the newer ones it refused
    with their reasons (newest first)."""
    refused = []
    for _, path in reversed(list_checkpoints(run_dir)):
        reason = checkpoint_problem(path)
        if reason is None:
            return path, refused
        refused.append((path, reason))
    return None, refused


def start_anew(run_dir: Path) -> str:
    """How to run again from the first step a run that has nothing to resume from: its own config, a new name."""
    return (
        f"start it anew from its config: python trainer.py --config {Path(run_dir) / 'config.yaml'} "
        "--set trainer.run_name=<a new name>"
    )


def resolve_resume(target: Path) -> tuple[Path, Path, list[tuple[Path, str]]]:
    """``(run_dir, checkpoint_dir, refused)`` for ``--resume TARGET``: a run directory (its newest checkpoint that
    passes :func:`checkpoint_problem`; ``refused``: the newer ones that did not, with why) or one checkpoint
    directory inside ``<run>/checkpoints/`` (refused with the reason when it fails). A checkpoint holding a pickle
    is refused (:func:`refuse_pickles`)."""
    target = Path(target)
    if STEP_DIR.match(target.name) and target.parent.name == "checkpoints":
        reason = checkpoint_problem(target)
        if reason is not None:
            run_dir = target.parent.parent
            usable, _ = newest_usable_checkpoint(run_dir)
            other = f"; the run's newest usable checkpoint is {usable}" if usable else "; the run has no usable one"
            raise CheckpointError(f"--resume {target}: refused, {reason}{other}")
        refuse_pickles(target)
        return target.parent.parent, target, []
    if not target.is_dir():
        raise CheckpointError(f"--resume {target}: no such run directory or checkpoint")
    if (target / "checkpoints").is_dir():
        restore_replaced(target / "checkpoints")
    if not list_checkpoints(target):
        raise CheckpointError(
            f"--resume {target}: the run has no checkpoint yet (trainer.save_final writes one when a run ends, "
            "trainer.save_freq: N one every N steps); "
            f"looked in {target / 'checkpoints'}; {start_anew(target)}"
        )
    latest, refused = newest_usable_checkpoint(target)
    if latest is None:
        reasons = "; ".join(f"{path.name}: {reason}" for path, reason in refused)
        raise CheckpointError(
            f"--resume {target}: no usable checkpoint, every one was refused ({reasons}); {start_anew(target)}"
        )
    refuse_pickles(latest)
    return target, latest, refused


def set_aside(checkpoint: Path) -> Path:
    """Rename a refused checkpoint to ``checkpoints/refused-step_NNNNNN`` (a name no listing picks up, so a later
    save of the same step or pruning never mistakes it for a good one; its files stay for a look)."""
    checkpoint = Path(checkpoint)
    target = checkpoint.with_name(f"refused-{checkpoint.name}")
    n = 1
    while target.exists():
        n += 1
        target = checkpoint.with_name(f"refused-{checkpoint.name}-{n}")
    os.rename(checkpoint, target)
    return target
