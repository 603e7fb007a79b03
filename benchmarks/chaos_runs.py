"""What a fault-injection campaign (:mod:`benchmarks.chaos`) reads from and does to a run directory: the summary its
verdict compares with the undisturbed run's, and the damage done to the newest checkpoint before a resume."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

from relay.checkpoint import latest_checkpoint


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
    from relay.metrics import system as sm
    from relay.run.digest import computed_metrics, digest
    from relay.run.sinks import METRICS_NAME

    rows = [json.loads(ln) for ln in (run_dir / METRICS_NAME).read_text().splitlines() if ln.strip()]
    driver = json.loads((latest_checkpoint(run_dir) / "driver.json").read_text())
    return {
        "digest": digest(computed_metrics(run_dir)),
        "policy": policy_sha256(run_dir),
        "optimizer_steps": rows[-1].get(pm.ACTOR_OPTIMIZER_STEPS),
        "cursor": driver["data"],
        "restarts": sum(float(v) for r in rows for k, v in r.items() if k.startswith(sm.RECOVERY_PREFIX)),
    }
