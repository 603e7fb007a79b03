"""The schema of the objective: ``algorithm`` (advantage estimator, policy loss, KL, rollout corrections, the group
filter)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RetryUnsolvedConfig:
    """Zero-pass prompts sampled again: the group filter's first extra pass samples the step's unsolved prompts
    (no sample right, ``acc`` 0 in every one) once more, at ``temperature``, before it draws new prompts."""

    enable: bool = False  # the first extra pass retries the first pass's unsolved prompts
    # The retry's sampling temperature (null: rollout.temperature). The learner's log-probs stay at
    # rollout.temperature; the retried samples' rollout log-probs are at this one (their sampling distribution).
    temperature: float | None = None


@dataclass
class FilterGroupsConfig:
    """DAPO's dynamic sampling: train only on prompt groups whose samples did not all score the same."""

    enable: bool = False  # drop the groups whose samples all scored the same
    metric: str = "score"  # score (the graded reward) | acc (the 0/1 correctness)
    # Extra rollout passes a step may sample to refill the dropped groups; when they run out the step trains
    # on its groups with signal plus as few constant groups as keep the batch size (and logs how many).
    max_extra_passes: int = 4
    retry_unsolved: RetryUnsolvedConfig = field(default_factory=RetryUnsolvedConfig)


@dataclass
class KLCtrlConfig:
    """The KL-in-reward coefficient's controller (relay/grpo/kl_controller.py): ``fixed`` keeps
    ``algorithm.kl_coef``; ``adaptive`` moves it towards ``target_kl`` (mean per-token KL) over ``horizon``
    sequences (Ziegler et al. 2019)."""

    type: str = "fixed"  # fixed: kl_coef throughout; adaptive: moved towards target_kl
    target_kl: float = 0.1  # adaptive: the mean per-token KL aimed at
    horizon: int = 10000  # adaptive: sequences over which kl_coef moves towards target_kl


@dataclass
class GspoConfig:
    """GSPO's range for the sequence ratio: ``[1 - clip_ratio_low, 1 + clip_ratio_high]`` (the paper's values)."""

    clip_ratio_low: float = 3e-4  # the sequence ratio's lower bound is 1 - this
    clip_ratio_high: float = 4e-4  # the sequence ratio's upper bound is 1 + this


@dataclass
class GeoMeanConfig:
    """GMPO's range for each token's log-ratio: ``[-clip_log_low, clip_log_high]`` (the paper's 0.4)."""

    clip_log_low: float = 0.4  # a token's log-ratio is at least -this
    clip_log_high: float = 0.4  # a token's log-ratio is at most this


@dataclass
class ClipCovConfig:
    """Clip-Cov: ``ratio`` of a micro-batch's tokens, drawn among those with a covariance in ``(lb, ub)``, lose their
    gradient."""

    ratio: float = 2e-4  # share of the micro-batch's tokens that lose their gradient
    lb: float = 1.0  # lower bound of the covariance they are drawn from
    ub: float = 5.0  # upper bound of that covariance


@dataclass
class KlCovConfig:
    """KL-Cov: the ``ratio`` of a micro-batch's tokens with the largest covariance get ``coef * |log ratio|``."""

    ratio: float = 2e-3  # share of the tokens, largest covariance first, that are penalised
    coef: float = 1.0  # the penalty's coefficient


@dataclass
class RolloutTokenMaskConfig:
    """IcePop: tokens whose ``pi_old / pi_rollout`` is outside ``[low, high]`` get no policy loss."""

    enable: bool = False  # mask the tokens outside [low, high]
    low: float = 0.5  # lowest pi_old / pi_rollout kept
    high: float = 2.0  # highest pi_old / pi_rollout kept


@dataclass
class RolloutSeqRejectConfig:
    """Sequences whose ``pi_old / pi_rollout`` (``ratio``: product or geometric mean of the token ratios) is outside
    ``[low, high]`` get no policy loss."""

    enable: bool = False  # reject the sequences outside [low, high]
    ratio: str = "geometric"  # the sequence ratio: geometric mean or product of its token ratios
    low: float = 0.5  # lowest sequence ratio kept
    high: float = 2.0  # highest sequence ratio kept


@dataclass
class AlgorithmConfig:
    # grpo | grpo_mean (no division by the group std) | rloo (leave-one-out baseline) | reinforce_plus_plus (returns
    # whitened over the batch) | reinforce_plus_plus_baseline (group mean, then batch whitening) | remax (the reward
    # of one greedy response per prompt as the baseline; the rollout samples it as an extra request); docs/algorithms.md
    adv_estimator: str = "grpo"
    norm_adv_by_std: bool = True  # divide a group's advantages by its std (false: mean only)
    gamma: float = 1.0  # reinforce_plus_plus: discount of the outcome reward towards earlier tokens
    use_kl_loss: bool = True  # add kl_loss_coef x KL(policy, reference) to the loss
    kl_loss_coef: float = 0.001  # beta: weight of the KL loss to the reference (use_kl_loss)
    kl_loss_type: str = "low_var_kl"  # the per-token KL estimator (Schulman's k1, k2, k3; low_var_kl: k3 clamped)
    # KL in the reward: each score minus kl_coef x the response's summed per-token KL (kl_loss_type estimator,
    # rollout or old-policy log-probs vs the reference) before the group-relative advantage.
    use_kl_in_reward: bool = False
    kl_coef: float = 0.001  # for use_kl_in_reward (the initial value with kl_ctrl.type=adaptive)
    kl_ctrl: KLCtrlConfig = field(default_factory=KLCtrlConfig)
    clip_ratio_low: float = 0.2  # the PPO ratio is clipped to [1 - clip_ratio_low, 1 + clip_ratio_high]
    clip_ratio_high: float = 0.2  # the clip range's upper side; above clip_ratio_low: DAPO's clip-higher
    clip_ratio_c: float | None = None  # dual clip: loss of a negative-advantage token capped at -A * c (> 1)
    # token-mean | seq-mean-token-sum | seq-mean-token-mean | seq-mean-token-sum-norm (Dr.GRPO: token sums
    # over sequences x loss_scale_constant, default data.max_response_length)
    loss_agg_mode: str = "token-mean"
    loss_scale_constant: float | None = None  # seq-mean-token-sum-norm's divisor (null: data.max_response_length)
    # The policy loss (relay/grpo/policy_losses.py; docs/algorithms.md): vanilla (PPO clip, the default) | gspo |
    # cispo | geo_mean | clip_cov | kl_cov; cispo and clip_cov use clip_ratio_low/high, the others their sections.
    policy_loss: str = "vanilla"
    gspo: GspoConfig = field(default_factory=GspoConfig)
    geo_mean: GeoMeanConfig = field(default_factory=GeoMeanConfig)
    clip_cov: ClipCovConfig = field(default_factory=ClipCovConfig)
    kl_cov: KlCovConfig = field(default_factory=KlCovConfig)
    entropy_coeff: float = 0.0  # loss -= entropy_coeff x entropy (0: entropy is a metric only)
    # Where the old-policy log-probs of the clipped ratio come from:
    #   learner: the learner's own log-probs before the update (exact for one optimizer step per batch);
    #   actor:   recomputed by the actor+ref role's synced copy of the policy;
    #   rollout: the rollout engine's own log-probs (the behaviour policy: nothing recomputed; off-policy
    #            samples are then clipped against the policy that sampled them).
    old_log_prob_source: str = "learner"
    # Who computes the reference log-probs of the KL terms (the initial policy; with LoRA the base, adapters off):
    #   learner:   the learner, in a program of its own before each optimizer step, from a frozen copy of the
    #              initial weights (with LoRA: the base weights it already holds, no copy). No actor_ref actor
    #              for the reference. With use_kl_in_reward the actor_ref role computes it anyway (the reward
    #              needs it before the update; a warning says so).
    #   actor_ref: the actor_ref role's own torch copy, concurrently with the reward.
    #   auto:      learner with LoRA (the base is already there: no copy), actor_ref in full fine-tuning or when
    #              use_kl_in_reward is on. configs/default.yaml sets learner (BENCHMARKS.md "Where the reference
    #              log-probs come from").
    ref_log_prob_source: str = "auto"
    # Rollout correction (relay/grpo/rollout_correction.py) for the rollout engine / learner mismatch and stale
    # samples, from log-probs, no gradient. rollout_is weights each token's policy loss: tis by min(pi_old /
    # pi_rollout, rollout_is_cap); seq_tis by its sequence's min(product of those ratios, cap); seq_geo_tis by
    # min(their geometric mean, cap). none | tis | seq_tis | seq_geo_tis
    rollout_is: str = "none"
    rollout_is_cap: float = 2.0  # the cap of rollout_is's importance weights
    rollout_token_mask: RolloutTokenMaskConfig = field(default_factory=RolloutTokenMaskConfig)
    rollout_seq_reject: RolloutSeqRejectConfig = field(default_factory=RolloutSeqRejectConfig)
    filter_groups: FilterGroupsConfig = field(default_factory=FilterGroupsConfig)
