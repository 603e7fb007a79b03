"""Driver side of checkpoints: save a step's full state atomically, and resume from one.

The learner actors write their state into the checkpoint's temporary directory, so the driver and
learner rank 0 must see the same filesystem (one node, or ``trainer.output_dir`` on shared storage).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from driver.role_group import Roles
from relay.checkpoint import checkpoint_path, prune_checkpoints, write_atomically
from relay.checkpoint.store import INFLIGHT_DIR, fsync_dir
from relay.config import RelayConfig
from relay.faults import fault_point
from relay.metrics import system as sm
from relay.run.jsonsafe import to_jsonable


class CheckpointWriteError(RuntimeError):
    """The driver's part of a checkpoint could not be written (a full disk, a lost mount); ``step`` is the
    checkpoint's next step. The half-written directory is removed: the older checkpoints stay as they were."""

    def __init__(self, step: int, cause: OSError) -> None:
        super().__init__(f"checkpoint step_{step:06d} could not be written: {cause}")
        self.step = step


def config_fingerprint(config_yaml: str) -> str:
    return hashlib.sha256(config_yaml.encode()).hexdigest()


def save_checkpoint(
    roles: Roles,
    run_dir: Path,
    next_step: int,
    data_state: dict,
    cfg: RelayConfig,
    config_yaml: str,
    model_path: str,
    write_inflight: Callable[[Path], None] | None = None,
    kl_coef: float | None = None,
    unrecorded: dict | None = None,
) -> Path:
    """``checkpoints/step_<next_step>``: learner state, data cursor, metrics so far, HF export, and with
    ``write_inflight`` the pipeline's collected batches of the steps ahead (it writes them into the directory it is
    given: :meth:`driver.pipeline.RolloutPipeline.save_inflight`). ``kl_coef``: the adaptive KL-in-reward
    coefficient reached (``algorithm.kl_ctrl``), restored on resume. ``unrecorded``: an emergency checkpoint's row of
    the step before it (its update applied, its sync or validation failed for good), which the resumed run records
    (:meth:`driver.training_run.TrainingRun.loop`)."""

    def write(tmp: Path) -> None:
        hf = str(tmp / "hf") if cfg.trainer.export_hf else None
        roles.learner.each("save_checkpoint", str(tmp / "learner"), hf, model_path, next_step, phase="checkpoint")
        fault_point("driver.checkpoint", next_step)  # between the learner's files and the driver's
        driver = {
            "next_step": next_step,
            "data": data_state,
            "seed": int(cfg.trainer.seed),
            "config_sha256": config_fingerprint(config_yaml),
            "kl_coef": kl_coef,
            **({"unrecorded": to_jsonable(unrecorded, keep_nonfinite=True)} if unrecorded is not None else {}),
            "saved_at": datetime.now(UTC).isoformat(),
        }
        (tmp / "driver.json").write_text(json.dumps(driver, indent=1))
        if write_inflight is not None:
            write_inflight(tmp / INFLIGHT_DIR)
        metrics = run_dir / "metrics.jsonl"
        if metrics.exists():
            shutil.copy2(metrics, tmp / "metrics.jsonl")

    path = write_atomically(checkpoint_path(run_dir, next_step), write)
    prune_checkpoints(run_dir, int(cfg.trainer.keep_checkpoints))
    return path


def restore_checkpoint(roles: Roles, checkpoint: Path) -> dict:
    """Load the learner state on every learner host and sync its weights to the rollout engines and the
    actor copy; returns ``driver.json`` (next step, data cursor, ``kl_coef``)."""
    driver = json.loads((Path(checkpoint) / "driver.json").read_text())
    weights = roles.learner.each("load_checkpoint", str(Path(checkpoint) / "learner"), phase="resume")[0]
    roles.sync(weights, int(driver["next_step"]))
    return driver


def truncate_metrics(metrics_path: Path, next_step: int) -> int:
    """Drop metric lines of steps >= ``next_step`` (run after the checkpoint, then lost) and lines that do not parse
    as a JSON object (a line cut short when a run was killed mid-write); returns how many were dropped.

    The file is rewritten atomically: the kept lines go to a temporary file in the same directory, which is fsynced
    and then moved over the old one by ``os.replace`` (and the directory fsynced), so a crash during the rewrite leaves
    the old file or the new one, never a half-written file. Every kept line ends in a newline, so the next append
    starts a line of its own."""
    if not metrics_path.exists():
        return 0
    text = metrics_path.read_text()
    lines = text.splitlines()

    def kept(line: str) -> bool:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            return False
        return isinstance(row, dict) and row.get(sm.STEP, 0) < next_step

    kept_lines = [line for line in lines if line.strip() and kept(line)]
    new_text = "".join(line + "\n" for line in kept_lines)
    if new_text == text:
        return 0
    tmp = metrics_path.with_name(f".{metrics_path.name}.tmp-{os.getpid()}")
    try:
        with tmp.open("w") as f:
            f.write(new_text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, metrics_path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(metrics_path.parent)
    return len(lines) - len(kept_lines)
