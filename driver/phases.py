"""The driver's calls into the roles for the phases before the update: rollout, actor_ref log-probs, reward.

Each call sends a role only the fields it reads, and checks that the answer came from the current
weights: a rollout or actor copy restarted by Ray in between reports an older ``weights_version``; it is
given the current weights and asked again (``recovery/stale_*``).
"""

from __future__ import annotations

from typing import Any

import ray

from relay.data_proto import DataProto

# What each role is sent: only the fields it reads cross the object store.
ACTOR_REF_INPUTS = ["input_ids", "attention_mask", "position_ids", "response_mask", "rollout_log_probs"]
REWARD_INPUTS = ["response_text", "ground_truth", "question", "uid"]
# Tensors the reward role gets: grading reads text; a user function may read the tokens too.
REWARD_TENSORS = {"function": ["responses", "response_mask", "response_length"]}


def pop_metrics(part: DataProto) -> dict[str, float]:
    """Each role reports its metrics in ``meta_info["metrics"]``; take them out before merging batches."""
    return part.meta_info.pop("metrics", {})


def _count(m: dict[str, float], key: str) -> None:
    m[key] = m.get(key, 0) + 1


def rollout(roles: Any, prompts: DataProto, step: int, m: dict[str, float], sample_pass: int = 0) -> DataProto:
    """``prompts`` sampled by every replica (``rollout.n`` rows per prompt), from the current weights."""
    from roles import fanout
    from roles.recovery import resync

    gen = fanout.generate(roles.rollout, prompts, step, sample_pass)
    if int(gen.meta_info.get("weights_version", 0)) != roles.weights_version:
        resync(roles, "rollout")
        _count(m, "recovery/stale_rollouts")
        gen = fanout.generate(roles.rollout, prompts, step, sample_pass)
    return gen


def submit_log_probs(roles: Any, gen: DataProto) -> list[ray.ObjectRef]:
    """Start the actor_ref log-prob forward on ``gen``'s rows (no call when the plan has no actor_ref)."""
    from roles import fanout

    return fanout.submit_shares(roles.actor_ref, "compute_log_probs", gen.select(ACTOR_REF_INPUTS, []))


def gather_log_probs(roles: Any, gen: DataProto, refs: list[ray.ObjectRef], m: dict[str, float]) -> DataProto | None:
    """The log-probs started by :func:`submit_log_probs` (None without actor_ref actors); recomputed when an
    actor copy restarted in between and answered from old weights."""
    from roles import fanout
    from roles.recovery import resync

    if not refs:
        return None
    lp = fanout.gather_rows("actor_ref", refs, "actor_ref log-probs")
    if lp.meta_info.get("actor_weights_version", roles.weights_version) != roles.weights_version:
        resync(roles, "actor_ref")  # a restarted actor copy: old-policy log-probs from the current weights
        _count(m, "recovery/stale_actor_copies")
        lp = fanout.gather_rows("actor_ref", submit_log_probs(roles, gen), "actor_ref log-probs")
    return lp


def submit_reward(roles: Any, gen: DataProto, cfg: Any, step: int) -> ray.ObjectRef:
    """Start grading ``gen``'s responses in the reward role."""
    reward_input = gen.select(REWARD_TENSORS.get(cfg.reward.mode, ["response_length"]), REWARD_INPUTS)
    return roles.reward.score.remote(reward_input, step)


def gather_reward(ref: ray.ObjectRef) -> DataProto:
    """The reward role's answer: ``scores``, ``acc`` and its metrics."""
    from roles.launch import call

    (rw,) = call(["reward-0"], [ref], "reward")
    return rw
