"""The tiny model's configs and the metrics its runs write, shared by the tests that train it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from relay.config import LoadedConfig, load_config
from relay.repo import REPO_ROOT

TINY_PRESET = REPO_ROOT / "configs" / "tiny.yaml"


def tiny_config(model_dir: Path, overrides: Sequence[str]) -> LoadedConfig:
    """``configs/tiny.yaml`` on ``model_dir`` with ``overrides``, no environment variables."""
    return load_config(TINY_PRESET, [f"model.path={model_dir}", *overrides], environ={})


def run_config(
    model_dir: Path,
    steps: int,
    overrides: Sequence[str],
    resume: Path | None = None,
    extra: Sequence[str] = (),
) -> LoadedConfig:
    """A run of ``steps`` training steps: a new one (:func:`tiny_config` with ``overrides``), or with ``resume`` the
    run saved there (its ``config.yaml``; ``overrides`` do not apply). ``extra`` applies to both."""
    total = f"trainer.total_training_steps={steps}"
    if resume is not None:
        return load_config(resume / "config.yaml", [total, *extra], environ={})
    return tiny_config(model_dir, [total, *overrides, *extra])


def uncatalogued(rows: Sequence[dict]) -> list[str]:
    """The keys of ``rows`` the metric catalog has no entry for (relay/metrics: every key Relay writes has one)."""
    from relay.metrics import lookup

    return sorted({key for row in rows for key in row if lookup(key) is None})


def metric_rows(run_dir: Path) -> dict[int, dict]:
    """The rows of the run's ``metrics.jsonl`` by step; every key written must be in the metric catalog, so each
    test that trains a run also checks the catalog covers what that run wrote."""
    rows = [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines() if ln.strip()]
    missing = uncatalogued(rows)
    assert not missing, f"{run_dir / 'metrics.jsonl'} holds keys the metric catalog lacks: {missing}"
    return {int(r["step"]): r for r in rows}


def crashed_copy(run_dir: Path, to: Path, last_checkpoint: int) -> None:
    """``to``: ``run_dir`` as a process killed just after writing checkpoint ``last_checkpoint`` leaves it (its config,
    manifest, events and every metric line it wrote; no later checkpoint): a resume test's stopped run without a
    second trainer run, when the uninterrupted run saved after every step."""
    import shutil

    from relay.checkpoint import list_checkpoints

    shutil.copytree(run_dir, to, ignore=shutil.ignore_patterns("checkpoints", "tensorboard", "logs"))
    for step, path in list_checkpoints(run_dir):
        if step <= last_checkpoint:
            shutil.copytree(path, to / "checkpoints" / path.name)
