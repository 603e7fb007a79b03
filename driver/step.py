"""One on-policy GRPO step on the driver: collect (rollout, actor_ref || reward, advantage), update, weight sync.

``run_step`` reads as the step does: each phase is a call on a role group (:mod:`driver.role_group`) that returns
what it made and its metrics, and :mod:`driver.step_metrics` derives the step's figures from them. A role actor
that dies mid-step is restarted and its call sent again inside its group (:mod:`driver.role_group`). With
``trainer.max_staleness`` >= 1, :mod:`driver.pipeline` runs the same phases with the collect ahead.
"""

from __future__ import annotations

from driver.collect import collect_phase, grades_beside_log_probs
from driver.dynamic_sampling import GradeObserver, MorePrompts
from driver.role_group import Roles
from driver.step_metrics import collect_compute_seconds, derived_timing_metrics, memory_metrics, reward_metrics
from driver.timing import PhaseTimer
from relay.config import RelayConfig
from relay.data_proto import DataProto
from relay.grpo.kl_controller import KLController
from relay.metrics import system as sm
from roles.role_call import RoleFailedError


class SyncFailedAfterUpdate(RoleFailedError):
    """The weight sync after a step's update failed for good. The learner holds the update, so the step is done but
    for its weights reaching the engines (a resume loads them); ``metrics`` is the step's row without the sync's
    figures (its wall times: none is in the metrics digest), kept so that the run's record loses no step."""

    def __init__(self, cause: RoleFailedError, metrics: dict[str, float]) -> None:
        super().__init__(str(cause), cause.actor, cause.died, cause.oom, cause.hung)
        self.metrics = metrics


def run_step(
    roles: Roles,
    prompts: DataProto,
    cfg: RelayConfig,
    step: int,
    kl_control: KLController,
    more_prompts: MorePrompts | None = None,
    observe: GradeObserver | None = None,
) -> tuple[DataProto, dict[str, float]]:
    """One GRPO step across the roles; returns the final batch and the step's metrics. ``kl_control`` is the run's
    KL-in-reward controller (``algorithm.kl_ctrl``); ``more_prompts(size, sample_pass)`` draws the prompts of
    dynamic sampling's extra passes (``algorithm.filter_groups``); ``observe`` reads which prompts no sample
    solved (``data.revisit_unsolved``).

    A rollout/actor_ref/reward/tools actor that dies during the step is restarted by Ray, given the synced weights,
    and the call it died in is sent again (``recovery/restarts``); the update itself is never repeated. A sync that
    fails for good after the update raises :class:`SyncFailedAfterUpdate` with the step's metrics so far.
    """
    timer, restarts_before = PhaseTimer(step), len(roles.restarted)
    with timer.phase(sm.TIMING_STEP):
        batch, collect_metrics = collect_phase(roles, prompts, cfg, step, kl_control, more_prompts, observe)
        roles.drop_synced_weights()
        weights, update_metrics = roles.learner.update(batch, step, cfg.rollout.sleep_during_update)
        m = {sm.STEP: step, **collect_metrics, **update_metrics}
        m.update({**reward_metrics(batch, m), **memory_metrics(m)})
        m[sm.RECOVERY_RESTARTS] = float(len(roles.restarted) - restarts_before)
        try:
            sync_metrics = roles.sync(weights, step + 1)
        except RoleFailedError as exc:
            raise SyncFailedAfterUpdate(exc, m) from exc
    m[sm.RECOVERY_RESTARTS] = float(len(roles.restarted) - restarts_before)  # the sync's restarts too
    m.update({**sync_metrics, **timer.metrics()})
    m.update(
        derived_timing_metrics(
            m,
            collect_busy=collect_compute_seconds(m, grades_beside_log_probs(cfg)),
            sync_wall=m[sm.TIMING_SYNC],
            sync_busy=max(m[sm.SYNC_ROLLOUT_LOAD_SECONDS], m[sm.SYNC_ACTOR_LOAD_SECONDS]),
        )
    )
    return batch, m
