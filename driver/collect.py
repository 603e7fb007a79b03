"""The phases of a step before the update: rollout -> (actor_ref log-probs || reward) -> advantage.

``collect_phase`` returns the training batch and the phases' metrics; the on-policy step
(:mod:`driver.step`) runs it right before the update, the pipeline (:mod:`driver.pipeline`) ``k`` steps ahead.
"""

from __future__ import annotations

import numpy as np

from driver import remax
from driver.dynamic_sampling import GradeObserver, MorePrompts, collect_filtered, report_grades
from driver.role_group import Roles
from driver.step_metrics import overlap_metrics
from driver.timing import PhaseTimer
from relay.config import RelayConfig
from relay.data_proto import DataProto
from relay.grpo import AdvantageOptions, get_advantage_estimator, kl_penalized_scores
from relay.grpo.group_filter import split_groups
from relay.grpo.kl_controller import KLController
from relay.metrics import outcomes as om
from relay.metrics import policy as pm
from relay.metrics import system as sm


def advantage_phase(
    batch: DataProto, cfg: RelayConfig, kl_control: KLController | None = None
) -> tuple[DataProto, dict[str, float]]:
    """The advantages of ``algorithm.adv_estimator`` on the driver (numpy; microseconds for a step's batch).

    With ``algorithm.use_kl_in_reward`` the scores first lose ``kl_coef`` x each response's summed
    KL to the reference (old-policy log-probs when the batch has them, else the rollout's); ``kl_control`` (the
    run's :class:`relay.grpo.kl_controller.KLController`, default one from ``algorithm.kl_ctrl``) gives ``kl_coef``
    and, when adaptive, is updated with this batch's mean per-token KL.
    """
    alg = cfg.algorithm
    scores = batch.batch["scores"]
    metrics: dict[str, float] = {}
    if alg.use_kl_in_reward:
        scores, metrics = _kl_penalized(batch, cfg, kl_control or KLController.from_config(alg))
    estimator = get_advantage_estimator(alg.adv_estimator)
    # remax: the greedy responses' rewards (driver.remax), not KL-penalised
    baselines = batch.batch["remax_baselines"] if alg.adv_estimator == "remax" else None
    options = AdvantageOptions(norm_by_std=alg.norm_adv_by_std, gamma=alg.gamma, baselines=baselines)
    token_adv, seq_adv = estimator(scores, batch.non_tensor["uid"], batch.batch["response_mask"], options)
    out = batch.union(DataProto.from_dict(batch={"advantages": token_adv.astype(np.float32)}))
    return out, {
        **metrics,
        pm.ADVANTAGE_ABS_MEAN: float(np.abs(seq_adv).mean()),
        pm.ADVANTAGE_ZERO_GROUPS: _zero_group_frac(batch),
    }


def _kl_penalized(batch: DataProto, cfg: RelayConfig, control: KLController) -> tuple[np.ndarray, dict[str, float]]:
    """The scores minus ``kl_coef`` x each response's summed KL to the reference, and the ``reward/kl_*`` metrics;
    an adaptive ``control`` is updated with the batch's mean per-token KL."""
    coef, mask = control.value, batch.batch["response_mask"]
    policy = batch.batch["old_log_probs"] if "old_log_probs" in batch.batch else batch.batch["rollout_log_probs"]
    scores, kl = kl_penalized_scores(
        batch.batch["scores"], policy, batch.batch["ref_log_probs"], mask, coef, cfg.algorithm.kl_loss_type
    )
    metrics = {
        om.REWARD_KL_PENALTY_MEAN: float(coef * kl.mean()),
        om.REWARD_PENALIZED_MEAN: float(scores.mean()),
        om.REWARD_KL_COEF: coef,  # the coefficient this batch was penalised with
        om.REWARD_KL_PER_TOKEN: float(kl.sum() / max(float(np.sum(mask)), 1.0)),
    }
    control.update(metrics[om.REWARD_KL_PER_TOKEN], len(scores))
    return scores, metrics


def _zero_group_frac(batch: DataProto) -> float:
    """Share of prompt groups whose samples all scored the same (they carry no gradient)."""
    split = split_groups(batch.batch["scores"], batch.non_tensor["uid"])
    return len(split.constant) / (len(split.constant) + len(split.signal))


def grades_beside_log_probs(cfg: RelayConfig) -> bool:
    """Whether a step grades at the same time as the actor_ref forward (not with dynamic sampling, which
    grades first and runs the forward on the kept groups only)."""
    return bool(cfg.reward.overlap_with_actor_ref) and not cfg.algorithm.filter_groups.enable


def collect_phase(
    roles: Roles,
    prompts: DataProto,
    cfg: RelayConfig,
    step: int,
    kl: KLController,
    more: MorePrompts | None = None,
    observe: GradeObserver | None = None,
) -> tuple[DataProto, dict[str, float]]:
    """rollout -> (actor_ref log-probs || reward) -> advantage: the training batch and the phases' metrics.

    ``kl`` is the run's KL-in-reward controller (:func:`advantage_phase`). Without actor_ref
    actors (nothing reads reference or actor-copy log-probs: ``placement.plan.actor_ref_needed``) the
    reward phase runs alone and ``actor_ref/ref_forward`` is 0. With ``algorithm.filter_groups.enable``
    the rows come from :func:`driver.dynamic_sampling.collect_filtered` (``more(size, sample_pass)`` draws the
    extra passes' prompts). ``observe`` (``data.revisit_unsolved``: the prompt source's ``observe_graded``) reads
    which of the sampled prompts no sample solved (:func:`driver.dynamic_sampling.report_grades`).
    """
    timer = PhaseTimer(step)
    if cfg.algorithm.filter_groups.enable:
        if more is None:
            raise ValueError("algorithm.filter_groups.enable needs `more` (the prompt source) for its extra passes")
        scored, metrics = collect_filtered(roles, prompts, cfg, step, more, observe)
        overlapped = False
    else:
        scored, metrics = _rollout_and_score(roles, prompts, cfg, step)
        report_grades(observe, scored)
        overlapped = grades_beside_log_probs(cfg)
    with timer.phase(sm.TIMING_ADVANTAGE):
        batch, adv_metrics = advantage_phase(scored, cfg, kl)
    metrics = {**metrics, **adv_metrics, **timer.metrics()}
    metrics.update(overlap_metrics(metrics, overlapped))
    return batch, metrics


def _rollout_and_score(
    roles: Roles, prompts: DataProto, cfg: RelayConfig, step: int
) -> tuple[DataProto, dict[str, float]]:
    """The rollout, then its log-probs and grades (side by side unless ``reward.overlap_with_actor_ref=false``),
    joined into one batch, with ``timing/actor_ref_and_reward``; ReMax's greedy baselines are sampled and graded
    beside them."""
    timer = PhaseTimer(step)
    gen, metrics = roles.rollout.generate(prompts, step)
    greedy = remax.submit_greedy(roles, prompts, step) if cfg.algorithm.adv_estimator == "remax" else None
    with timer.phase(sm.TIMING_ACTOR_REF_AND_REWARD):
        lp_pending = roles.actor_ref.submit_log_probs(gen, step)
        beside = grades_beside_log_probs(cfg)
        rw_pending = roles.reward.submit_grade(gen, cfg.reward.mode, step) if beside else None
        lp, lp_metrics = roles.actor_ref.log_probs(lp_pending)
        rw, rw_metrics = roles.reward.grades(rw_pending or roles.reward.submit_grade(gen, cfg.reward.mode, step))
        if greedy is not None:
            baselines, remax_metrics = remax.baseline_scores(roles, greedy, gen, cfg, step)
            rw = rw.union(DataProto.from_dict(batch={"remax_baselines": baselines}))
            metrics.update(remax_metrics)
    # the actor_ref role reports 1.0 when it ran the reference forward
    metrics.update({**timer.metrics(), pm.ACTOR_REF_REF_FORWARD: 0.0, **lp_metrics, **rw_metrics})
    return (gen if lp is None else gen.union(lp)).union(rw), metrics
