"""The driver's phases of a step, each a call on a role group: rollout, actor_ref log-probs, reward, update, sync.

Each sends a role only the fields it reads and returns what the role made with the metrics it adds to the step,
its own wall time among them (``timing/rollout``, ``timing/update``, ``timing/sync``): no phase writes into a
timer it was handed. Restarts and stale weights are the group's business (:mod:`driver.role_group`).
"""

from __future__ import annotations

from driver.role_group import Pending, Roles, Weights
from driver.timing import PhaseTimer
from relay.config import RelayConfig
from relay.data_proto import DataProto
from relay.evaluation.generation import grade_inputs
from relay.learner.inputs import LEARNER_INPUTS
from relay.metrics import policy as pm
from relay.metrics import system as sm
from relay.rank_metrics import merge_rank_metrics
from relay.rollout_batch import merge_rollout_parts
from relay.run import timeline

# What each role is sent: only the fields it reads cross the object store.
ACTOR_REF_INPUTS = ["input_ids", "attention_mask", "position_ids", "response_mask", "rollout_log_probs"]
# Tensors the reward role gets: grading reads text; a user function may read the tokens too.
REWARD_TENSORS = {"function": ["responses", "response_mask", "response_length"]}


def rollout(roles: Roles, prompts: DataProto, step: int, sample_pass: int = 0) -> tuple[DataProto, dict[str, float]]:
    """``prompts`` sampled by every replica (``rollout.n`` rows per prompt), from the synced weights; the
    metrics are ``timing/rollout`` (both tries when the first came from stale weights) and
    ``offpolicy/weights_version`` (the weights the rows came from)."""
    timer = PhaseTimer(step)
    span = f"generate (pass {sample_pass})" if sample_pass else "generate"
    with timer.phase(sm.TIMING_ROLLOUT):
        pending = roles.rollout.submit("generate", prompts, step, sample_pass, step=step)
        gen = roles.rollout.current_rows(pending, "rollout", "weights_version", span, merge_rollout_parts)
    for start, end in gen.meta_info.pop("tool_spans", []):  # the tools role's busy time, on its own track
        timeline.record("tools", "calls", start, end, step)
    return gen, {pm.OFFPOLICY_WEIGHTS_VERSION: float(gen.meta_info.get("weights_version", 0)), **timer.metrics()}


def submit_log_probs(roles: Roles, gen: DataProto, step: int) -> Pending:
    """Start the actor_ref log-prob forward on ``gen``'s rows (no call when the plan has no actor_ref)."""
    data = gen.select(ACTOR_REF_INPUTS, [])
    data.meta_info["step"] = step  # the actor_ref's fault point (relay.faults)
    return roles.actor_ref.submit("compute_log_probs", data, step=step)


def gather_log_probs(roles: Roles, pending: Pending) -> DataProto | None:
    """The log-probs started by :func:`submit_log_probs` (None without actor_ref actors), from the synced weights
    when the ranks hold an actor copy."""
    if not pending.refs:
        return None
    return roles.actor_ref.current_rows(pending, "actor_ref log-probs", "actor_weights_version", "log_probs")


def submit_reward(roles: Roles, gen: DataProto, cfg: RelayConfig, step: int) -> Pending:
    """Start grading ``gen``'s responses in the reward role."""
    reward_input = gen.select(REWARD_TENSORS.get(cfg.reward.mode, ["response_length"]), grade_inputs(gen))
    return roles.reward.submit_to_first("score", reward_input, step, step=step)


def gather_reward(roles: Roles, pending: Pending) -> DataProto:
    """The reward role's answer to :func:`submit_reward`: ``scores``, ``acc`` and its metrics (on the timeline as
    ``grade``)."""
    (graded,) = roles.reward.answers(pending, "reward", "grade")
    return graded


def grade(roles: Roles, gen: DataProto, cfg: RelayConfig, step: int) -> DataProto:
    """``gen``'s responses graded by the reward role, waited for (:func:`submit_reward`, then :func:`gather_reward`)."""
    return gather_reward(roles, submit_reward(roles, gen, cfg, step))


def update(roles: Roles, batch: DataProto, cfg: RelayConfig, step: int) -> tuple[Weights, dict[str, float]]:
    """The learner update of ``batch`` on every learner host (each its share of the rows: the update is one JAX job
    across them): the new weights (rank 0 publishes them: an object-store ref or a memory-file handle) and the
    learner's metrics with ``timing/update``. With ``rollout.sleep_during_update`` the engines free their memory
    for the update's length."""
    timer = PhaseTimer(step)
    train_keys = [k for k in LEARNER_INPUTS if k in batch.batch]
    if cfg.rollout.sleep_during_update:
        roles.rollout.each("sleep", phase="rollout sleep")
    with timer.phase(sm.TIMING_UPDATE):
        data = batch.select(train_keys, [])
        data.meta_info["step"] = step  # the learner's fault point (relay.faults)
        pending = roles.learner.submit("update", data, step=step)
        outs = roles.learner.answers(pending, "update", "update")
    roles.last_updated_step = step
    if cfg.rollout.sleep_during_update:
        roles.rollout.each("wake_up", phase="rollout wake-up")
    return outs[0][0], {**merge_rank_metrics([metrics for _, metrics in outs]), **timer.metrics()}


def sync(roles: Roles, weights: Weights, version: int) -> dict[str, float]:
    """Every rollout replica and actor copy loads ``weights`` as ``version``: each role's slowest load and the
    phase's wall time (``timing/sync``)."""
    timer = PhaseTimer(version - 1)
    with timer.phase(sm.TIMING_SYNC):
        rollout_load, actor_load = roles.sync(weights, version)
    return {sm.SYNC_ROLLOUT_LOAD_SECONDS: rollout_load, sm.SYNC_ACTOR_LOAD_SECONDS: actor_load, **timer.metrics()}
