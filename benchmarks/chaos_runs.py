"""What a fault-injection campaign (:mod:`benchmarks.chaos`) reads from and does to a run directory: the summary its
verdict compares with the undisturbed run's, how long the work after each fault point took in it, and the damage
done to the newest checkpoint before a resume."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

from relay.checkpoint import latest_checkpoint
from relay.metrics import system as sm
from relay.metrics import validation as vm
from relay.run.events import read_events
from relay.run.sinks import METRICS_NAME
from relay.run.summarize import load_metrics

# The work after each fault point as a run's metrics time it, by the step the point is armed at (a sync's step is
# the update's before it: rollout.load_weights at step k loads the weights of step k's update).
POINT_WORK = {
    "rollout.generate": sm.TIMING_ROLE_COMPUTE.format(role="rollout"),
    "rollout.load_weights": sm.SYNC_ROLLOUT_LOAD_SECONDS,
    "reward.score": sm.TIMING_ROLE_COMPUTE.format(role="reward"),
    "actor_ref.compute_log_probs": sm.TIMING_ROLE_COMPUTE.format(role="actor_ref"),
    "learner.update": sm.TIMING_ROLE_COMPUTE.format(role="update"),
}


def corrupt_newest(run_dir: Path, how: str, rng: random.Random) -> Path:
    """Truncate (to half) or flip one byte of a file of ``run_dir``'s newest checkpoint; returns the file."""
    newest = latest_checkpoint(run_dir)
    files = sorted(p for p in newest.rglob("*") if p.is_file() and p.stat().st_size > 0)
    victim = rng.choice(files)
    data = victim.read_bytes()
    if how == "truncate":
        victim.write_bytes(data[: len(data) // 2])
    else:
        at = rng.randrange(len(data))
        victim.write_bytes(data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :])
    return victim


def policy_sha256(run_dir: Path) -> str:
    """SHA-256 of the newest checkpoint's policy tensors (names and bytes, in name order)."""
    from safetensors.numpy import load_file

    tensors = load_file(str(latest_checkpoint(run_dir) / "learner" / "policy.safetensors"))
    digest = hashlib.sha256()
    for name in sorted(tensors):
        digest.update(name.encode() + tensors[name].tobytes())
    return digest.hexdigest()


def run_summary(run_dir: Path) -> dict:
    """What the verdict compares: the metrics digest, the policy's hash, the last step's optimizer steps, the
    final data cursor, and the recoveries Relay counted (``recovery/*``: restarts and stale answers asked again)."""
    from relay.metrics import policy as pm
    from relay.run.digest import computed_metrics, digest

    rows = load_metrics(run_dir / METRICS_NAME)
    driver = json.loads((latest_checkpoint(run_dir) / "driver.json").read_text())
    return {
        "digest": digest(computed_metrics(run_dir)),
        "policy": policy_sha256(run_dir),
        "optimizer_steps": rows[-1].get(pm.ACTOR_OPTIMIZER_STEPS),
        "cursor": driver["data"],
        "restarts": sum(float(v) for r in rows for k, v in r.items() if k.startswith(sm.RECOVERY_PREFIX)),
    }


def work_spans(run_dir: Path) -> dict[str, dict[int, float]]:
    """Seconds of the work after each fault point, by the step it is armed at, as ``run_dir`` (the undisturbed
    run) measured it: :data:`POINT_WORK`'s metrics, and ``rollout.evaluate``'s generation by the weights version
    each validation read (the points's step there). A delay drawn inside a span lands its fault inside that work.

    Worked example: a row ``{"step": 1, "timing/rollout_compute": 1.08}`` gives ``{"rollout.generate": {1: 1.08}}``,
    and a validation event of version 2 that generated for 0.37 s ``{"rollout.evaluate": {2: 0.37}}``."""
    spans: dict[str, dict[int, float]] = {}
    for row in load_metrics(run_dir / METRICS_NAME):
        for point, key in POINT_WORK.items():
            if key in row:
                spans.setdefault(point, {})[int(row[sm.STEP])] = float(row[key])
    for event in read_events(run_dir):
        if event.get("event") == "validation" and vm.VAL_GENERATE_COMPUTE in event:
            version = int(event[vm.VAL_WEIGHTS_VERSION])
            spans.setdefault("rollout.evaluate", {})[version] = float(event[vm.VAL_GENERATE_COMPUTE])
    return spans
