"""The driver's calls into the roles for the phases before the update: rollout, actor_ref log-probs, reward.

Each call sends a role only the fields it reads, and checks that the answer came from the current
weights: a rollout or actor copy restarted by Ray in between reports an older ``weights_version``; it is
given the current weights and asked again (``recovery/stale_*``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import ray

from relay.data_proto import DataProto
from relay.run import timeline

# What each role is sent: only the fields it reads cross the object store.
ACTOR_REF_INPUTS = ["input_ids", "attention_mask", "position_ids", "response_mask", "rollout_log_probs"]
REWARD_INPUTS = ["response_text", "ground_truth", "question", "uid"]
# Tensors the reward role gets: grading reads text; a user function may read the tokens too.
REWARD_TENSORS = {"function": ["responses", "response_mask", "response_length"]}


@dataclass(frozen=True)
class Pending:
    """A role call in flight: its refs, when it was sent, and the step (for the timeline)."""

    refs: list[ray.ObjectRef]
    sent: float
    step: int


def _record_compute(role: str, phase: str, pending: Pending, metrics: dict[str, float], key: str) -> None:
    """The role's busy span: from the call's send to send + the compute time it reported (never past now).
    Roles called side by side are gathered one after the other, so the gather time would overstate one."""
    end = min(time.time(), pending.sent + float(metrics.get(key, time.time() - pending.sent)))
    timeline.record(role, phase, pending.sent, end, pending.step)


def pop_metrics(part: DataProto) -> dict[str, float]:
    """Each role reports its metrics in ``meta_info["metrics"]``; take them out before merging batches."""
    return part.meta_info.pop("metrics", {})


def _count(m: dict[str, float], key: str) -> None:
    m[key] = m.get(key, 0) + 1


def rollout(roles: Any, prompts: DataProto, step: int, m: dict[str, float], sample_pass: int = 0) -> DataProto:
    """``prompts`` sampled by every replica (``rollout.n`` rows per prompt), from the current weights."""
    from roles import fanout
    from roles.recovery import resync

    def generate() -> DataProto:
        start = time.time()
        gen = fanout.generate(roles.rollout, prompts, step, sample_pass)
        phase = f"generate (pass {sample_pass})" if sample_pass else "generate"
        timeline.record("rollout", phase, start, time.time(), step)
        return gen

    gen = generate()
    if int(gen.meta_info.get("weights_version", 0)) != roles.weights_version:
        resync(roles, "rollout")
        _count(m, "recovery/stale_rollouts")
        gen = generate()
    version = float(gen.meta_info.get("weights_version", 0))  # the oldest weights any of the step's rows came from
    m["offpolicy/weights_version"] = min(m.get("offpolicy/weights_version", version), version)
    return gen


def submit_log_probs(roles: Any, gen: DataProto, step: int) -> Pending:
    """Start the actor_ref log-prob forward on ``gen``'s rows (no call when the plan has no actor_ref)."""
    from roles import fanout

    refs = fanout.submit_shares(roles.actor_ref, "compute_log_probs", gen.select(ACTOR_REF_INPUTS, []))
    return Pending(refs, time.time(), step)


def gather_log_probs(roles: Any, gen: DataProto, pending: Pending, m: dict[str, float]) -> DataProto | None:
    """The log-probs started by :func:`submit_log_probs` (None without actor_ref actors); recomputed when an
    actor copy restarted in between and answered from old weights."""
    from roles import fanout
    from roles.recovery import resync

    if not pending.refs:
        return None
    lp = fanout.gather_rows("actor_ref", pending.refs, "actor_ref log-probs")
    if lp.meta_info.get("actor_weights_version", roles.weights_version) != roles.weights_version:
        resync(roles, "actor_ref")  # a restarted actor copy: old-policy log-probs from the current weights
        _count(m, "recovery/stale_actor_copies")
        pending = submit_log_probs(roles, gen, pending.step)
        lp = fanout.gather_rows("actor_ref", pending.refs, "actor_ref log-probs")
    _record_compute("actor_ref", "log_probs", pending, lp.meta_info.get("metrics", {}), "timing/actor_ref_compute")
    return lp


def submit_reward(roles: Any, gen: DataProto, cfg: Any, step: int) -> Pending:
    """Start grading ``gen``'s responses in the reward role."""
    reward_input = gen.select(REWARD_TENSORS.get(cfg.reward.mode, ["response_length"]), REWARD_INPUTS)
    return Pending([roles.reward.score.remote(reward_input, step)], time.time(), step)


def gather_reward(pending: Pending) -> DataProto:
    """The reward role's answer: ``scores``, ``acc`` and its metrics."""
    from roles.launch import call

    (rw,) = call(["reward-0"], pending.refs, "reward")
    _record_compute("reward", "grade", pending, rw.meta_info.get("metrics", {}), "timing/reward_compute")
    return rw
