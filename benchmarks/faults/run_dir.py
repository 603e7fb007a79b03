"""What a fault-injection campaign (:mod:`benchmarks.faults.chaos`) reads from and does to a run directory: the summary
its verdict compares with the undisturbed run's, how long the work after each fault point took in it, whether a fault
hit a process the run's record names, and the damage done to the newest checkpoint before a resume."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import numpy as np

from relay.checkpoint import latest_checkpoint, list_checkpoints
from relay.faults import Fault, sent_marker
from relay.metrics import system as sm
from relay.metrics import validation as vm
from relay.run.events import read_events
from relay.run.sinks import METRICS_NAME
from relay.run.summarize import load_metrics

# The points inside a checkpoint's writing, armed at the checkpoint's step.
CHECKPOINT_WRITES = ("driver.checkpoint", "learner.save_checkpoint")
# The work after each fault point as a run's metrics time it, by the step the point is armed at (a sync's step is
# the update's before it: rollout.load_weights at step k loads the weights of step k's update).
POINT_WORK = {
    "rollout.generate": sm.TIMING_ROLE_COMPUTE.format(role="rollout"),
    "rollout.load_weights": sm.SYNC_ROLLOUT_LOAD_SECONDS,
    "reward.score": sm.TIMING_ROLE_COMPUTE.format(role="reward"),
    "actor_ref.compute_log_probs": sm.TIMING_ROLE_COMPUTE.format(role="actor_ref"),
    "learner.update": sm.TIMING_ROLE_COMPUTE.format(role="update"),
    "reward_model.score": sm.TIMING_ROLE_COMPUTE.format(role="reward_model"),
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


# driver.json's keys that differ between two runs of one job: when it was saved, the config's fingerprint (the
# config holds trainer.output_dir and run_name), and an emergency checkpoint's ``unrecorded`` row (a step's metrics,
# timings among them, that the resume records: the digest compares it where it lands, in the metrics history)
DRIVER_STATE_OF_THE_RUN = ("saved_at", "config_sha256", "unrecorded")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checkpoint_fingerprint(checkpoint: Path) -> dict[str, str]:
    """Each file of a checkpoint by its path inside it, as its SHA-256: the learner's state (policy, optimizer,
    counters), the HF export, the pipeline's collected batches. ``driver.json`` counts without
    :data:`DRIVER_STATE_OF_THE_RUN`; the metrics history (the digest compares it) and the batches' figures (their
    timings) are left out."""
    out = {}
    for path in sorted(p for p in checkpoint.rglob("*") if p.is_file()):
        name = str(path.relative_to(checkpoint))
        if name == "driver.json":
            state = {k: v for k, v in json.loads(path.read_text()).items() if k not in DRIVER_STATE_OF_THE_RUN}
            out[name] = hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()
        elif name not in (METRICS_NAME, "checkpoint_manifest.json") and not (
            name.startswith("inflight/") and name.endswith(".json")
        ):
            out[name] = file_sha256(path)
    return out


def run_summary(run_dir: Path) -> dict:
    """What the verdict compares: the metrics digest and rows, the policy's hash, the last step's optimizer steps,
    the final data cursor, every kept checkpoint's files (:func:`checkpoint_fingerprint`), and the recoveries Relay
    counted (``recovery/*``: restarts and stale answers asked again)."""
    from relay.metrics import policy as pm
    from relay.run.digest import computed_metrics, digest

    rows = load_metrics(run_dir / METRICS_NAME)
    driver = json.loads((latest_checkpoint(run_dir) / "driver.json").read_text())
    computed = computed_metrics(run_dir)
    return {
        "digest": digest(computed),
        "rows": computed,
        "policy": policy_sha256(run_dir),
        "optimizer_steps": rows[-1].get(pm.ACTOR_OPTIMIZER_STEPS),
        "cursor": driver["data"],
        "checkpoints": {path.name: checkpoint_fingerprint(path) for _, path in list_checkpoints(run_dir)},
        "restarts": sum(float(v) for r in rows for k, v in r.items() if k.startswith(sm.RECOVERY_PREFIX)),
    }


def _first_file_difference(ours: dict[str, str], theirs: dict[str, str], part: str = "") -> str | None:
    """The first file (in name order) of a part (``optimizer``: the learner's optimizer files; ``hf``: the export;
    ``""``: every file) whose hash differs or that one side lacks."""
    in_part = {
        "": lambda n: True,
        "optimizer": lambda n: n.rsplit("/", 1)[-1].startswith("optimizer."),
        "hf": lambda n: n.split("/", 1)[0] == "hf",
    }[part]
    names = sorted(n for n in set(ours) | set(theirs) if in_part(n))
    return next((n for n in names if ours.get(n) != theirs.get(n)), None)


def differences(summary: dict, reference: dict) -> list[str]:
    """The verdict's comparisons that differ between a completed run and the undisturbed one, each named with where
    it differs: ``metrics``, ``policy``, ``optimizer_steps``, ``cursor``, ``optimizer`` (the final checkpoint's
    optimizer state), ``export`` (its HF export), ``checkpoints`` (any other file of a checkpoint both runs kept;
    the final one must be kept by both).

    >>> files = {"learner/optimizer.safetensors": "o", "hf/model.safetensors": "m"}
    >>> ref = {"digest": "a", "rows": [], "policy": "p", "optimizer_steps": 2.0, "cursor": {},
    ...        "checkpoints": {"step_000002": files}}
    >>> run = {**ref, "checkpoints": {"step_000002": {**files, "learner/optimizer.safetensors": "O"}}}
    >>> differences(run, ref)
    ['optimizer (step_000002 learner/optimizer.safetensors)']
    """
    from relay.run.digest import first_difference

    found = []
    if summary["digest"] != reference["digest"]:
        found.append(f"metrics ({first_difference(reference.get('rows', []), summary.get('rows', []))})")
    found += [key for key in ("policy", "optimizer_steps", "cursor") if summary[key] != reference[key]]
    ours, theirs = summary.get("checkpoints", {}), reference.get("checkpoints", {})
    final = max(theirs, default=None)
    if final is not None and final not in ours:
        found.append(f"checkpoints ({final} missing)")
    shared = sorted(set(ours) & set(theirs))
    if final in ours:
        for part, files in (("optimizer", "optimizer"), ("export", "hf")):
            name = _first_file_difference(ours[final], theirs[final], files)
            if name is not None:
                found.append(f"{part} ({final} {name})")
    for step in shared:
        name = _first_file_difference(ours[step], theirs[step])
        already = step == final and any(f.startswith(("optimizer", "export")) for f in found)
        if name is not None and not already:
            found.append(f"checkpoints ({step} {name})")
            break
    return found


def initial_weights(model_dir: Path) -> dict[str, np.ndarray]:
    """The model's weights before training (every ``*.safetensors`` in its directory), as float32 by name."""
    from safetensors.torch import load_file

    tensors: dict[str, np.ndarray] = {}
    for path in sorted(Path(model_dir).glob("*.safetensors")):
        tensors.update({name: t.float().numpy() for name, t in load_file(str(path)).items()})
    return tensors


def weights_moved(run_dir: Path) -> bool:
    """Whether the newest checkpoint's policy differs from the weights the run started from (its ``model.path``)."""
    from omegaconf import OmegaConf
    from safetensors.numpy import load_file

    from relay.models.paths import resolve_model_path

    model_dir = resolve_model_path(str(OmegaConf.load(run_dir / "config.yaml").model.path))  # a name: RELAY_HOME's
    before = initial_weights(model_dir)
    # the learner's tree store names a leaf by its path, ['model.embed_tokens.weight']: the HF name inside
    saved = load_file(str(latest_checkpoint(run_dir) / "learner" / "policy.safetensors"))
    after = {name.removeprefix("['").removesuffix("']"): value for name, value in saved.items()}
    shared = sorted(set(before) & set(after))
    if not shared:
        raise ValueError(f"{run_dir}: its policy and {model_dir} share no tensor name")
    return any(not np.array_equal(before[name], after[name].astype(np.float32)) for name in shared)


def signal_problems(run_dir: Path) -> list[str]:
    """Why a campaign's undisturbed run cannot tell a lost or doubled update from a good one, or ``[]``: a step whose
    groups all scored alike (``advantage/zero_groups_frac`` = 1: no advantage, no gradient), a step with
    ``actor/grad_norm`` = 0, or a final policy equal to the initial weights.

    Worked example: the tiny random model under GSM8K's rule reward earns 0 everywhere: every step reads
    ``zero_groups_frac`` 1.0 and ``grad_norm`` 0.0, and the weights never move."""
    from relay.metrics import policy as pm

    problems = []
    for row in load_metrics(run_dir / METRICS_NAME):
        step, zero, grad = row[sm.STEP], row.get(pm.ADVANTAGE_ZERO_GROUPS), row.get(pm.ACTOR_GRAD_NORM)
        if zero is None or zero >= 1.0:
            problems.append(f"step {step}: every group's rewards are equal ({pm.ADVANTAGE_ZERO_GROUPS}={zero})")
        if grad is None or not grad > 0.0:
            problems.append(f"step {step}: {pm.ACTOR_GRAD_NORM}={grad}")
    if not weights_moved(run_dir):
        problems.append("the final policy equals the initial weights")
    return problems


def work_spans(run_dir: Path) -> dict[str, dict[int, float]]:
    """Seconds of the work after each fault point, by the step it is armed at, as ``run_dir`` (the undisturbed
    run) measured it: :data:`POINT_WORK`'s metrics, and ``rollout.evaluate``'s generation by the weights version
    each validation read (the points's step there). A delay drawn inside a span lands its fault inside that work.

    Worked example: a row ``{"step": 1, "timing/rollout_compute": 1.08}`` gives ``{"rollout.generate": {1: 1.08}}``,
    and a validation event of version 2 that generated for 0.37 s ``{"rollout.evaluate": {2: 0.37}}``; a checkpoint
    event of step 3 ``{"driver.checkpoint": {3: 0.0}, "learner.save_checkpoint": {3: 0.0}}`` (no timed work after
    those points: the fault fires at the point, between a checkpoint's files)."""
    spans: dict[str, dict[int, float]] = {}
    for row in load_metrics(run_dir / METRICS_NAME):
        for point, key in POINT_WORK.items():
            if key in row:
                spans.setdefault(point, {})[int(row[sm.STEP])] = float(row[key])
    for event in read_events(run_dir):
        if event.get("event") == "validation" and vm.VAL_GENERATE_COMPUTE in event:
            version = int(event[vm.VAL_WEIGHTS_VERSION])
            spans.setdefault("rollout.evaluate", {})[version] = float(event[vm.VAL_GENERATE_COMPUTE])
        if event.get("event") == "checkpoint":  # the steps the run's cadence saves at: its checkpoint points' steps
            for point in CHECKPOINT_WRITES:
                spans.setdefault(point, {})[int(event["step"])] = 0.0
    return spans


def delivery_problem(fault: Fault, run_dir: Path) -> str | None:
    """None when ``fault``'s delivery record (``<marker>.sent``: the sender's pid and Ray actor id, the signal's
    target) names a process of this run that plays the point's part: a driver of one of the run's ``start`` events
    for a driver point, else an actor of the point's role in its ``roles`` events (a Ray actor id stays the actor's
    across Ray's restarts of it); and a kill, stop or term aimed at the sender itself. Else what does not match: a
    fault counted as fired must have hit the process it was drawn for."""
    sent = json.loads(Path(sent_marker(fault.marker)).read_text())
    role, events = fault.point.split(".")[0], read_events(run_dir)
    if role == "driver":
        pids = sorted({e.get("pid") for e in events if e["event"] == "start"} - {None})
        if sent["pid"] not in pids:
            return f"sent by pid {sent['pid']}, not a driver of this run (its start events: {pids})"
    else:
        actors = {
            process.get("actor_id")
            for e in events
            if e["event"] == "roles"
            for name, process in e.get("processes", {}).items()
            if name.rsplit("-", 1)[0] == role
        }
        if sent.get("actor_id") not in actors - {None}:
            return f"sent by actor {sent.get('actor_id')} (pid {sent['pid']}), not one of this run's {role} actors"
    if fault.action in ("kill", "stop", "term") and sent.get("target") != sent["pid"]:
        return f"{fault.action} sent to pid {sent.get('target')}, not to the process at the point (pid {sent['pid']})"
    return None
