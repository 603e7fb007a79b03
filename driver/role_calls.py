"""Each role's own calls, as methods of its group's kind (the kind each role's declaration names:
:mod:`relay.role_declarations`): :class:`RolloutGroup.generate`, :class:`ActorRefGroup.submit_log_probs`,
:class:`RewardGroup.grade`, :class:`RewardModelGroup.submit_scores`, :class:`LearnerGroup.update`. Each sends its role
only the fields it reads and returns what the role made with the metrics it adds, its own wall time among them; the
machinery they share (row shares, answers, restarts, the stale-weights check) is :class:`driver.role_group.RoleGroup`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from driver.role_group import Pending, RoleGroup, Weights
from driver.timing import PhaseTimer
from relay.data_proto import DataProto
from relay.evaluation.generation import grade_inputs
from relay.learner.inputs import LEARNER_INPUTS
from relay.metrics import policy as pm
from relay.metrics import system as sm
from relay.rank_metrics import merge_rank_metrics
from relay.rollout_batch import merge_rollout_parts, pop_metrics
from relay.run import timeline
from relay.scoring.reward_sources import combine

# What each role is sent: only the fields it reads cross the object store.
ACTOR_REF_INPUTS = ["input_ids", "attention_mask", "position_ids", "response_mask", "rollout_log_probs"]
# Tensors the reward role gets: grading reads text; a user function may read the tokens too.
REWARD_TENSORS = {"function": ["responses", "response_mask", "response_length"]}
REWARD_MODEL_INPUTS = ["question", "response_text", "ground_truth"]  # the conversation; a judge's {reference}


class RolloutGroup(RoleGroup):
    """The rollout replicas: a step's samples (and, around an update, the engines' sleep)."""

    def generate(
        self, prompts: DataProto, step: int, sample_pass: int = 0, temperature: float | None = None
    ) -> tuple[DataProto, dict[str, float]]:
        """``prompts`` sampled by every replica (``rollout.n`` rows per prompt), from the synced weights, at
        ``temperature`` (None: ``rollout.temperature``); the metrics are ``timing/rollout`` (both tries when the
        first came from stale weights), ``offpolicy/weights_version`` (the weights the rows came from) and the
        replicas' own."""
        timer = PhaseTimer(step)
        span = f"generate (pass {sample_pass})" if sample_pass else "generate"
        with timer.phase(sm.TIMING_ROLLOUT):
            pending = self.dispatch("generate", prompts, step, sample_pass, False, temperature, step=step)
            gen = self.current_rows(pending, "rollout", span, merge_rollout_parts)
        for start, end in gen.meta_info.pop("tool_spans", []):  # the tools role's busy time, on its own track
            timeline.record("tools", "calls", start, end, step)
        version = float(gen.meta_info.get("weights_version", 0))
        return gen, {pm.OFFPOLICY_WEIGHTS_VERSION: version, **timer.metrics(), **pop_metrics(gen)}


class ActorRefGroup(RoleGroup):
    """The actor_ref ranks: reference (and old-policy) log-probs of the sampled rows."""

    def submit_log_probs(self, gen: DataProto, step: int) -> Pending:
        """Start the log-prob forward on ``gen``'s rows (no call when the plan has no actor_ref)."""
        data = gen.select(ACTOR_REF_INPUTS, [])
        data.meta_info["step"] = step  # the actor_ref's fault point (relay.faults)
        return self.dispatch("compute_log_probs", data, step=step)

    def log_probs(self, pending: Pending) -> tuple[DataProto | None, dict[str, float]]:
        """The log-probs of :meth:`submit_log_probs` and the ranks' metrics (None and none without actors), from the
        synced weights when the ranks hold an actor copy."""
        if not pending.refs:
            return None, {}
        rows = self.current_rows(pending, "actor_ref log-probs", "log_probs")
        return rows, pop_metrics(rows)


@dataclass(frozen=True)
class GradeCall:
    """A grading in flight: the reward role's call and, with ``reward_model.enable``, the reward model's beside it."""

    reward: Pending
    model: Pending | None = None


class RewardGroup(RoleGroup):
    """The reward role: rank 0 grades a whole batch (its grader processes share it out). With a reward model the
    grading also sends the responses to the reward_model role, at the same time, and the answer's ``scores`` are
    ``reward.sources``' sum (:func:`relay.scoring.reward_sources.combine`); ``acc`` stays the reward role's."""

    def submit_grade(self, gen: DataProto, mode: str, step: int) -> GradeCall:
        """Start grading ``gen``'s responses; ``mode`` is ``reward.mode`` (a user function gets the tokens too)."""
        reward_input = gen.select(REWARD_TENSORS.get(mode, ["response_length"]), grade_inputs(gen))
        model = self._roles.reward_model
        scored = model.submit_scores(gen, step) if len(model) else None
        return GradeCall(self.dispatch("score", reward_input, step, step=step), scored)

    def grades(self, pending: GradeCall) -> tuple[DataProto, dict[str, float]]:
        """The answer to :meth:`submit_grade` (``scores``, ``acc``) and the roles' metrics; span ``grade``."""
        (graded,) = self.answers(pending.reward, "reward", "grade")
        metrics = pop_metrics(graded)
        columns = {"reward": graded.batch["scores"]}
        if pending.model is not None:
            rm_scores, rm_metrics = self._roles.reward_model.scores(pending.model)
            columns["reward_model"] = rm_scores
            metrics.update(rm_metrics)
        scores, source_metrics = combine(columns, self._roles.reward_sources)
        if scores is not columns["reward"]:
            graded.batch["scores"] = scores
        return graded, {**metrics, **source_metrics}

    def grade(self, gen: DataProto, mode: str, step: int) -> tuple[DataProto, dict[str, float]]:
        """:meth:`submit_grade`, waited for."""
        return self.grades(self.submit_grade(gen, mode, step))


class RewardModelGroup(RoleGroup):
    """The reward_model role: each rank scores its share of the rows (``rm_scores``)."""

    def submit_scores(self, gen: DataProto, step: int) -> Pending:
        return self.dispatch("score", gen.select([], REWARD_MODEL_INPUTS), step, step=step)

    def scores(self, pending: Pending) -> tuple[np.ndarray, dict[str, float]]:
        """The ``rm_scores`` of :meth:`submit_scores`, in row order, and the ranks' metrics; span ``score``."""
        rows = self.rows(pending, "reward_model", "score")
        return rows.batch["rm_scores"], pop_metrics(rows)


class LearnerGroup(RoleGroup):
    """The learner hosts: one JAX job across them; rank 0 publishes the weights."""

    def update(self, batch: DataProto, step: int, sleep_rollout: bool = False) -> tuple[Weights, dict[str, float]]:
        """The update of ``batch`` on every host (each its share of the rows): the new weights (an object-store ref
        or a memory-file handle) and the learner's metrics with ``timing/update``. With ``sleep_rollout``
        (``rollout.sleep_during_update``) the engines free their memory for the update's length."""
        timer, rollout = PhaseTimer(step), self._roles.rollout
        if sleep_rollout:
            rollout.each("sleep", phase="rollout sleep")
        with timer.phase(sm.TIMING_UPDATE):
            data = batch.select([k for k in LEARNER_INPUTS if k in batch.batch], [])
            data.meta_info["step"] = step  # the learner's fault point (relay.faults)
            outs = self.answers(self.dispatch("update", data, step=step), "update", "update")
        self._roles.last_updated_step = step
        if sleep_rollout:
            rollout.each("wake_up", phase="rollout wake-up")
        return outs[0][0], {**merge_rank_metrics([metrics for _, metrics in outs]), **timer.metrics()}
