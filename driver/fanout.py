"""Driver-side fan-out of one phase over a role's ranks, and the gather back into one batch.

A role with several actors (rollout replicas, one actor_ref per GPU) gets consecutive shares of the
batch (sizes differ by at most one row) and the driver stacks their answers in the same order, so
the rows line up with the batch that went out.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import ray
from ray.actor import ActorHandle

from driver.launch import Roles, Weights, call
from relay.data_proto import DataProto
from relay.rank_metrics import merge_rank_metrics
from relay.rollout_batch import merge_rollout_parts, split_rows
from relay.run import timeline


def submit_shares(handles: Sequence[ActorHandle], method: str, data: DataProto, *args: Any) -> list[ray.ObjectRef]:
    """Call ``method`` on each actor with its share of ``data`` (fewer rows than actors: some idle; no actors:
    no calls)."""
    if not handles:
        return []
    shares = split_rows(len(data), len(handles))
    return [getattr(h, method).remote(data[s], *args) for h, s in zip(handles, shares, strict=False)]


def names(role: str, refs: Sequence[Any]) -> list[str]:
    return [f"{role}-{rank}" for rank in range(len(refs))]


def generate(rollouts: Sequence[ActorHandle], prompts: DataProto, step: int, sample_pass: int = 0) -> DataProto:
    """All replicas sample their share of the prompts at once; one batch, prompt order kept."""
    refs = submit_shares(rollouts, "generate", prompts, step, sample_pass)
    return merge_rollout_parts(call(names("rollout", refs), refs, "rollout"))


def gather_rows(role: str, refs: Sequence[ray.ObjectRef], phase: str) -> DataProto:
    """Stack the ranks' row shares; their metrics are merged into ``meta_info["metrics"]``."""
    parts = call(names(role, refs), refs, phase)
    metrics = merge_rank_metrics([p.meta_info.pop("metrics", {}) for p in parts])
    out = DataProto.concat(parts) if len(parts) > 1 else parts[0]
    out.meta_info["metrics"] = metrics
    for key in ("weights_version", "actor_weights_version"):
        versions = [p.meta_info[key] for p in parts if key in p.meta_info]
        if versions:
            out.meta_info[key] = min(versions)  # the stalest rank decides
    return out


def load_weights(roles: Roles, weights_ref: Weights, version: int) -> tuple[float, float]:
    """Every rollout replica and actor copy loads the same object-store weights; slowest load per role
    (0.0 for actor_ref without an actor copy: its reference model never changes and is not sent the weights)."""
    handles = [(role, h) for role in ("rollout", "actor_ref") for h in roles.weight_holders(role)]
    start = time.time()
    refs = [h.load_weights.remote(weights_ref, version) for _, h in handles]
    labels = [f"{role}-{i}" for role in ("rollout", "actor_ref") for i in range(len(roles.weight_holders(role)))]
    results = call(labels, refs, "weight sync")
    seconds = [(role, r["seconds"]) for (role, _), r in zip(handles, results, strict=True)]
    rollout = max((s for role, s in seconds if role == "rollout"), default=0.0)
    actor = max((s for role, s in seconds if role == "actor_ref"), default=0.0)
    for role, busy in (("rollout", rollout), ("actor_ref", actor)):
        if busy > 0:
            timeline.record(role, "load_weights", start, start + busy, version - 1)
    if roles.weights_ref is not weights_ref:
        release_weights(roles, roles.weights_ref)
    roles.weights_ref, roles.weights_version = weights_ref, version
    return rollout, actor


def release_weights(roles: Roles, weights_ref: Weights | None) -> None:
    """Drop weights no role needs any more: a learner memory file is closed by the learner (fire and forget;
    queued before its next call), an object-store ref is freed when the caller drops it."""
    from relay.shared_weights import SharedWeights

    if isinstance(weights_ref, SharedWeights):
        roles.learners[0].release_weights.remote(weights_ref)


def each(handles: Sequence[ActorHandle], role: str, method: str, phase: str) -> list[Any]:
    """Call a no-argument method on every actor of a role and wait for all."""
    refs = [getattr(h, method).remote() for h in handles]
    return call(names(role, refs), refs, phase)
