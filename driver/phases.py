"""The driver's calls into the roles for the phases before the update: rollout, actor_ref log-probs, reward.

Each call sends a role only the fields it reads, and checks that the answer came from the current
weights: a rollout or actor copy restarted by Ray in between reports an older ``weights_version``; it is
given the current weights and asked again (``recovery/stale_*``). Each returns its answer and the metrics it
adds to the step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import ray

from driver import fanout
from driver.launch import Roles, call
from driver.recovery import resync
from driver.timing import PhaseTimer
from relay.config import RelayConfig
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


def rollout(roles: Roles, prompts: DataProto, step: int, sample_pass: int = 0) -> tuple[DataProto, dict[str, float]]:
    """``prompts`` sampled by every replica (``rollout.n`` rows per prompt), from the current weights; the
    metrics are ``timing/rollout`` (both tries when the first came from stale weights), ``offpolicy/weights_version``
    (the weights the rows came from) and ``recovery/stale_rollouts`` when a restarted replica was resynced."""
    timer = PhaseTimer(step)
    span = f"generate (pass {sample_pass})" if sample_pass else "generate"
    metrics: dict[str, float] = {}
    with timer.phase("timing/rollout", role="rollout", span=span):
        gen = fanout.generate(roles.rollout, prompts, step, sample_pass)
    if int(gen.meta_info.get("weights_version", 0)) != roles.weights_version:
        resync(roles, "rollout")
        metrics["recovery/stale_rollouts"] = 1.0
        with timer.phase("timing/rollout", role="rollout", span=span):
            gen = fanout.generate(roles.rollout, prompts, step, sample_pass)
    metrics["offpolicy/weights_version"] = float(gen.meta_info.get("weights_version", 0))
    for start, end in gen.meta_info.pop("tool_spans", []):  # the tools role's busy time, on its own track
        timeline.record("tools", "calls", start, end, step)
    return gen, {**metrics, **timer.metrics()}


def submit_log_probs(roles: Roles, gen: DataProto, step: int) -> Pending:
    """Start the actor_ref log-prob forward on ``gen``'s rows (no call when the plan has no actor_ref)."""
    refs = fanout.submit_shares(roles.actor_ref, "compute_log_probs", gen.select(ACTOR_REF_INPUTS, []))
    return Pending(refs, time.time(), step)


def gather_log_probs(roles: Roles, gen: DataProto, pending: Pending) -> tuple[DataProto | None, dict[str, float]]:
    """The log-probs started by :func:`submit_log_probs` (None without actor_ref actors); recomputed when an
    actor copy restarted in between and answered from old weights (``recovery/stale_actor_copies``)."""
    if not pending.refs:
        return None, {}
    metrics: dict[str, float] = {}
    lp = fanout.gather_rows("actor_ref", pending.refs, "actor_ref log-probs")
    if lp.meta_info.get("actor_weights_version", roles.weights_version) != roles.weights_version:
        resync(roles, "actor_ref")  # a restarted actor copy: old-policy log-probs from the current weights
        metrics["recovery/stale_actor_copies"] = 1.0
        pending = submit_log_probs(roles, gen, pending.step)
        lp = fanout.gather_rows("actor_ref", pending.refs, "actor_ref log-probs")
    _record_compute("actor_ref", "log_probs", pending, lp.meta_info.get("metrics", {}), "timing/actor_ref_compute")
    return lp, metrics


def submit_reward(roles: Roles, gen: DataProto, cfg: RelayConfig, step: int) -> Pending:
    """Start grading ``gen``'s responses in the reward role."""
    reward_input = gen.select(REWARD_TENSORS.get(cfg.reward.mode, ["response_length"]), REWARD_INPUTS)
    return Pending([roles.reward.score.remote(reward_input, step)], time.time(), step)


def gather_reward(pending: Pending) -> DataProto:
    """The reward role's answer: ``scores``, ``acc`` and its metrics."""
    (rw,) = call(["reward-0"], pending.refs, "reward")
    _record_compute("reward", "grade", pending, rw.meta_info.get("metrics", {}), "timing/reward_compute")
    return rw
