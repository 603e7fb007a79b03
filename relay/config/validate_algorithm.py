"""The ``algorithm`` section's checks (:func:`relay.config.validate.validate` runs them): each problem names key,
value and a fix.

The names of the algorithm menus (advantage estimators, policy losses, KL kinds, loss aggregations, rollout
corrections, KL controllers) are read from the code's registries when a config is validated, so a newly registered
one is valid config. Those modules are imported inside the checks, not at module level: importing ``relay.config``
stays free of JAX.
"""

from __future__ import annotations

from typing import Any

from relay.config.checks import at_least, choice, positive

OLD_LOG_PROB_SOURCES = ("learner", "actor", "rollout")
REF_LOG_PROB_SOURCES = ("auto", "learner", "actor_ref")
FILTER_METRICS = ("score", "acc")


def check_algorithm(p: list[str], alg: Any, train: Any) -> None:
    """The ``algorithm`` section (and ``train.ppo_epochs``): the menus' names (advantage estimators, KL kinds, loss
    aggregations, rollout corrections, policy losses) read from their registries, the ranges and the settings that
    contradict each other."""
    # Through the package: importing relay.grpo registers every estimator (relay.grpo.reinforce's too).
    from relay.grpo import ADVANTAGE_ESTIMATORS, KL_KINDS, LOSS_AGG_MODES
    from relay.grpo.rollout_correction import ROLLOUT_IS_MODES

    choice(p, "algorithm.adv_estimator", alg.adv_estimator, tuple(ADVANTAGE_ESTIMATORS))
    if alg.adv_estimator == "remax" and alg.filter_groups.enable:
        p.append(
            "algorithm.adv_estimator=remax with algorithm.filter_groups.enable=true: the greedy baselines are sampled "
            "for a step's prompts, not for dynamic sampling's extra passes; turn one of them off"
        )
    if not 0.0 < alg.gamma <= 1.0:
        p.append(f"algorithm.gamma={alg.gamma}: must be in (0, 1] (the discount of reinforce_plus_plus's returns)")
    choice(p, "algorithm.kl_loss_type", alg.kl_loss_type, KL_KINDS)
    choice(p, "algorithm.old_log_prob_source", alg.old_log_prob_source, OLD_LOG_PROB_SOURCES)
    _reference(p, alg)
    choice(p, "algorithm.loss_agg_mode", alg.loss_agg_mode, LOSS_AGG_MODES)
    choice(p, "algorithm.rollout_is", alg.rollout_is, ROLLOUT_IS_MODES)
    _policy_loss(p, alg)
    _rollout_correction(p, alg)
    _kl_ctrl(p, alg)
    if alg.rollout_is_cap < 1:
        p.append(
            f"algorithm.rollout_is_cap={alg.rollout_is_cap}: must be >= 1 (a cap below 1 down-weights every token)"
        )
    at_least(p, "algorithm.kl_loss_coef", alg.kl_loss_coef, 0.0)
    at_least(p, "algorithm.kl_coef", alg.kl_coef, 0.0)
    at_least(p, "algorithm.entropy_coeff", alg.entropy_coeff, 0.0)
    if not 0 < alg.clip_ratio_low < 1:
        p.append(f"algorithm.clip_ratio_low={alg.clip_ratio_low}: must be in (0, 1)")
    positive(p, "algorithm.clip_ratio_high", alg.clip_ratio_high)
    if alg.clip_ratio_c is not None and alg.clip_ratio_c <= 1:
        p.append(f"algorithm.clip_ratio_c={alg.clip_ratio_c}: the dual-clip bound must be > 1 (3.0 is usual), or null")
    if alg.loss_scale_constant is not None and alg.loss_scale_constant <= 0:
        p.append(f"algorithm.loss_scale_constant={alg.loss_scale_constant}: must be > 0, or null")
    at_least(p, "train.ppo_epochs", train.ppo_epochs, 1)
    choice(p, "algorithm.filter_groups.metric", alg.filter_groups.metric, FILTER_METRICS)
    at_least(p, "algorithm.filter_groups.max_extra_passes", alg.filter_groups.max_extra_passes, 0)
    _retry_unsolved(p, alg.filter_groups)


def _retry_unsolved(p: list[str], fg: Any) -> None:
    """``algorithm.filter_groups.retry_unsolved``: a temperature above 0, and a pass to retry in (the filter on,
    at least one extra pass)."""
    retry = fg.retry_unsolved
    if retry.temperature is not None:
        positive(p, "algorithm.filter_groups.retry_unsolved.temperature", retry.temperature)
    if retry.enable and not (fg.enable and fg.max_extra_passes >= 1):
        p.append(
            f"algorithm.filter_groups.retry_unsolved.enable=true with algorithm.filter_groups.enable={fg.enable} and "
            f"max_extra_passes={fg.max_extra_passes}: the retry is the group filter's first extra pass; set "
            "algorithm.filter_groups.enable=true and max_extra_passes >= 1, or retry_unsolved.enable=false"
        )


def _reference(p: list[str], alg: Any) -> None:
    """``algorithm.ref_log_prob_source``: a choice (with KL-in-reward the actor_ref role computes the reference
    whatever it says; :func:`relay.config.derive.derive` warns)."""
    choice(p, "algorithm.ref_log_prob_source", alg.ref_log_prob_source, REF_LOG_PROB_SOURCES)


def _policy_loss(p: list[str], alg: Any) -> None:
    """``algorithm.policy_loss`` (a name of the policy-loss registry) and its section's settings."""
    from relay.grpo.policy_losses import POLICY_LOSSES

    choice(p, "algorithm.policy_loss", alg.policy_loss, tuple(POLICY_LOSSES))
    name = alg.policy_loss
    if alg.clip_ratio_c is not None and name != "vanilla":
        p.append(
            f"algorithm.clip_ratio_c={alg.clip_ratio_c} with algorithm.policy_loss={name}: the dual clip belongs to "
            "the vanilla loss; set algorithm.clip_ratio_c=null or algorithm.policy_loss=vanilla"
        )
    if name == "gspo":
        positive(p, "algorithm.gspo.clip_ratio_low", alg.gspo.clip_ratio_low)
        positive(p, "algorithm.gspo.clip_ratio_high", alg.gspo.clip_ratio_high)
        if not alg.gspo.clip_ratio_low < 1:
            p.append(f"algorithm.gspo.clip_ratio_low={alg.gspo.clip_ratio_low}: must be < 1 (the paper's is 3e-4)")
    if name == "geo_mean":
        positive(p, "algorithm.geo_mean.clip_log_low", alg.geo_mean.clip_log_low)
        positive(p, "algorithm.geo_mean.clip_log_high", alg.geo_mean.clip_log_high)
    for key in ("clip_cov", "kl_cov"):
        ratio = alg[key].ratio
        if name == key and not 0 < ratio <= 1:
            p.append(f"algorithm.{key}.ratio={ratio}: must be in (0, 1] (a share of the micro-batch's tokens)")
    if name == "clip_cov" and not alg.clip_cov.lb < alg.clip_cov.ub:
        p.append(f"algorithm.clip_cov.lb={alg.clip_cov.lb} must be below algorithm.clip_cov.ub={alg.clip_cov.ub}")
    if name == "kl_cov":
        at_least(p, "algorithm.kl_cov.coef", alg.kl_cov.coef, 0.0)


def _rollout_correction(p: list[str], alg: Any) -> None:
    """``algorithm.rollout_token_mask`` / ``rollout_seq_reject`` bounds, and a source that makes them meaningless."""
    from relay.grpo.rollout_correction import SEQUENCE_RATIOS

    on = []
    for key in ("rollout_token_mask", "rollout_seq_reject"):
        section = alg[key]
        if not section.enable:
            continue
        on.append(key)
        if not 0 < section.low < 1 < section.high:
            p.append(
                f"algorithm.{key}: low={section.low}, high={section.high}: need 0 < low < 1 < high (bounds on "
                "pi_old / pi_rollout; IcePop uses 0.5 and 2)"
            )
    if alg.rollout_seq_reject.enable:
        choice(p, "algorithm.rollout_seq_reject.ratio", alg.rollout_seq_reject.ratio, SEQUENCE_RATIOS)
    if alg.rollout_is != "none":
        on.append("rollout_is")
    if on and alg.old_log_prob_source == "rollout":
        p.append(
            f"algorithm.{on[0]} with algorithm.old_log_prob_source=rollout: the old policy is then the rollout's, "
            "so pi_old / pi_rollout is 1 and nothing is corrected; use old_log_prob_source=learner or actor"
        )


def _kl_ctrl(p: list[str], alg: Any) -> None:
    """``algorithm.kl_ctrl``: a controller type of the registry; an adaptive one needs a target, a horizon and a KL
    penalty in the reward to adapt."""
    from relay.grpo.kl_controller import KL_CTRL_TYPES

    ctrl = alg.kl_ctrl
    choice(p, "algorithm.kl_ctrl.type", ctrl.type, KL_CTRL_TYPES)
    if ctrl.type != "adaptive":
        return
    positive(p, "algorithm.kl_ctrl.target_kl", ctrl.target_kl)
    at_least(p, "algorithm.kl_ctrl.horizon", ctrl.horizon, 1)
    if not alg.use_kl_in_reward:
        p.append(
            "algorithm.kl_ctrl.type=adaptive with algorithm.use_kl_in_reward=false: the controller adapts the KL "
            "penalty in the reward (algorithm.kl_coef); set algorithm.use_kl_in_reward=true or kl_ctrl.type=fixed"
        )
    elif not alg.kl_coef > 0:
        p.append(f"algorithm.kl_coef={alg.kl_coef}: an adaptive controller multiplies it, so it must start > 0")
