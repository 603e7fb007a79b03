"""The policy-loss registry (``algorithm.policy_loss``): per-token losses of the sampled responses.

Every loss is ``fn(inputs: PolicyLossInputs, config: PolicyLossConfig) -> (per_token_loss [b, K], indicators)``,
jittable; ``indicators`` maps a metric name (``pg_clipfrac``, ...) to a per-token 0/1 array. The caller
aggregates the loss with ``algorithm.loss_agg_mode`` (:func:`relay.grpo.loss_aggregation.aggregate_slot_loss`) and
the indicators as token means, so every loss keeps the aggregation modes and the metrics.

Tokens may be packed several sequences to a row (:mod:`relay.packing`): ``slot_sequence`` numbers the
sequence each token belongs to within its row, and the sequence-level losses (``gspo``, ``geo_mean``) reduce
over it with :func:`sequence_mean_per_slot`.

Every ratio is ``exp`` of a log-ratio clipped to +-:data:`relay.grpo.log_ratio.MAX_LOG_RATIO`: a token's own
log-ratio for the token-level losses (:meth:`PolicyLossInputs.log_ratio`), the sequence's mean of its tokens'
unclipped log-ratios for the sequence-level ones.

| name | what it changes | paper |
|---|---|---|
| ``vanilla`` | PPO's clipped token ratio (with dual clip) | Schulman et al. 2017; Ye et al. 2020 |
| ``gspo`` | one ratio per sequence, the geometric mean of its token ratios, clipped | Zheng et al. 2025 (GSPO) |
| ``cispo`` | clipped, stop-gradient IS weight x log-prob: clipped tokens still pass a gradient | MiniMax-M1 2025 |
| ``geo_mean`` | the geometric mean of the clipped token ratios, times the advantage | Zhao et al. 2025 (GMPO) |
| ``clip_cov`` | a few tokens of high log-prob/advantage covariance lose their gradient | Cui et al. 2025 |
| ``kl_cov`` | the top tokens by that covariance get an ``|log ratio|`` penalty | Cui et al. 2025 |
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass, replace

import jax
import jax.numpy as jnp

from relay.grpo.log_ratio import MAX_LOG_RATIO
from relay.grpo.registry import Registry

# The settings each loss reads from its own ``algorithm.<loss>`` section (the others read only the clip range).
SECTION_SETTINGS: dict[str, tuple[str, ...]] = {
    "gspo": ("gspo_clip_ratio_low", "gspo_clip_ratio_high"),
    "geo_mean": ("geo_mean_clip_log_low", "geo_mean_clip_log_high"),
    "clip_cov": ("clip_cov_ratio", "clip_cov_lb", "clip_cov_ub"),
    "kl_cov": ("kl_cov_ratio", "kl_cov_coef"),
}


@dataclass(frozen=True)
class PolicyLossConfig:
    """``algorithm.policy_loss``, the ``algorithm`` section's clip range and dual clip, and the settings of the losses
    that have a section of their own (``algorithm.<loss>``), built from a config by
    :func:`relay.learner.grpo_loss.policy_loss_config`. The schema (:class:`relay.config.schema.AlgorithmConfig`) is
    the one place of their defaults: here a section's settings are None until given, and a loss whose settings are
    not all given is refused.

    Example: ``PolicyLossConfig("vanilla", 0.2, 0.28, None)`` is PPO's loss with clip-higher;
    ``PolicyLossConfig("gspo", 0.2, 0.2, None)`` raises (GSPO needs ``gspo_clip_ratio_low`` and ``_high``).
    """

    name: str
    clip_ratio_low: float  # vanilla, cispo, clip_cov: the token ratio's range [1 - low, 1 + high]
    clip_ratio_high: float
    clip_ratio_c: float | None  # vanilla's dual clip (None: off)
    gspo_clip_ratio_low: float | None = None  # gspo: the sequence ratio's range [1 - low, 1 + high]
    gspo_clip_ratio_high: float | None = None
    geo_mean_clip_log_low: float | None = None  # geo_mean: the token log-ratio's range [-low, high]
    geo_mean_clip_log_high: float | None = None
    clip_cov_ratio: float | None = None  # clip_cov: share of tokens whose gradient is cut
    clip_cov_lb: float | None = None  # clip_cov: covariance band the cut tokens are drawn from
    clip_cov_ub: float | None = None
    kl_cov_ratio: float | None = None  # kl_cov: share of tokens penalised
    kl_cov_coef: float | None = None  # kl_cov: weight of |log ratio| on them

    def __post_init__(self) -> None:
        unset = [key for key in SECTION_SETTINGS.get(self.name, ()) if getattr(self, key) is None]
        if unset:
            raise ValueError(
                f"policy loss '{self.name}' needs {', '.join(unset)} (the algorithm.{self.name} section; "
                "relay.learner.grpo_loss.policy_loss_config reads them from a config)"
            )


@dataclass(frozen=True)
class PolicyLossInputs:
    """One micro-batch's per-token arrays ``[b, K]`` (the slot layout of :mod:`relay.packing`)."""

    log_probs: jax.Array  # under the policy being trained (the gradient flows through these)
    old_log_probs: jax.Array
    advantages: jax.Array
    mask: jax.Array  # 1.0 on response tokens
    slot_sequence: jax.Array | None = None  # [b, K] int: the token's sequence within its row (1, 2, ...; 0 = pad)
    rng: jax.Array | None = None  # clip_cov's random choice

    def log_ratio(self) -> jax.Array:
        """Each token's ``log_probs - old_log_probs``, clipped to +-:data:`MAX_LOG_RATIO` (for a token ratio's
        ``exp``; a sequence's ratio reduces the unclipped values and clips the result)."""
        return jnp.clip(self.log_probs - self.old_log_probs, -MAX_LOG_RATIO, MAX_LOG_RATIO)


PolicyLoss = Callable[[PolicyLossInputs, PolicyLossConfig], tuple[jax.Array, dict[str, jax.Array]]]
POLICY_LOSSES: Registry[PolicyLoss] = Registry("policy loss")
register_policy_loss = POLICY_LOSSES.register
get_policy_loss = POLICY_LOSSES.get


def sequence_sum_per_slot(values: jax.Array, mask: jax.Array, slot_sequence: jax.Array) -> jax.Array:
    """Each token's value replaced by the masked sum over its sequence (tokens of the same row with the same
    ``slot_sequence``); padding tokens get their padding group's sum, which callers mask away.

    Worked example: one row, values ``[1, 3, 10, 0]``, sequences ``[1, 1, 2, 0]``, mask ``[1, 1, 1, 0]`` ->
    ``[4, 4, 10, 0]``.
    """
    b, k = values.shape
    ids = (jnp.arange(b)[:, None] * (k + 1) + slot_sequence).reshape(-1)
    weighted = values.reshape(-1) * mask.astype(values.dtype).reshape(-1)
    return jax.ops.segment_sum(weighted, ids, num_segments=b * (k + 1))[ids].reshape(b, k)


def sequence_mean_per_slot(values: jax.Array, mask: jax.Array, slot_sequence: jax.Array) -> jax.Array:
    """:func:`sequence_sum_per_slot` divided by the sequence's token count (``[1, 3, 10, 0]`` -> ``[2, 2, 10, 0]``)."""
    counts = sequence_sum_per_slot(jnp.ones_like(values), mask, slot_sequence)
    return sequence_sum_per_slot(values, mask, slot_sequence) / jnp.maximum(counts, 1.0)


def _require_sequences(inputs: PolicyLossInputs, name: str) -> jax.Array:
    if inputs.slot_sequence is None:
        raise ValueError(f"policy loss '{name}' is sequence-level: it needs slot_sequence (relay.packing)")
    return inputs.slot_sequence


def _check_clip_ratio_c(clip_ratio_c: float | None) -> None:
    """Raise ValueError unless ``clip_ratio_c`` is None or a number > 1 (checked at trace time)."""
    if isinstance(clip_ratio_c, numbers.Real) and not clip_ratio_c > 1.0:
        raise ValueError(f"clip_ratio_c={clip_ratio_c}: the dual-clip bound must be > 1 (verl uses 3.0)")


def policy_loss_per_token(
    log_probs: jax.Array,
    old_log_probs: jax.Array,
    advantages: jax.Array,
    *,
    clip_ratio_low: float,
    clip_ratio_high: float,
    clip_ratio_c: float | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Per-token PPO clipped surrogate, optionally dual-clipped, with the two 0/1 clip indicators.

    ``ratio = exp(log_probs - old_log_probs)`` (the log-ratio clipped to +-:data:`MAX_LOG_RATIO` before exp, as in
    verl), ``pg1 = -A * ratio``, ``pg2 = -A * clip(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)`` and the
    per-token loss is ``max(pg1, pg2)``.

    Dual clip (Ye et al. 2020, "Mastering Complex Control in MOBA Games with Deep RL"; verl's
    ``clip_ratio_c``): for a token with ``A < 0`` the clipped surrogate ``max(pg1, pg2) = -A * ratio`` grows
    without bound in the ratio, so one token whose probability rose a lot under the current policy can
    dominate the loss. With ``clip_ratio_c = c`` (must be > 1) the loss of such tokens becomes
    ``min(max(pg1, pg2), -A * c)``; tokens with ``A >= 0`` are unchanged. Where the bound is active the
    loss is the constant ``-A * c``, so the token contributes no gradient.

    Worked example, clip range [0.8, 1.2], ``c = 3``:

    - ``A = -1``, ratio ``exp(1.5) = 4.4817``: pg1 = 4.4817, pg2 = 1.2, max = 4.4817 > 3 -> loss 3
      (dual-clipped, gradient 0);
    - ``A = -1``, ratio ``exp(0.5) = 1.6487``: max = 1.6487 < 3 -> loss 1.6487 (unchanged);
    - ``A = +1``, ratio 4.4817: pg1 = -4.4817, pg2 = -1.2 -> loss -1.2 (clipped as usual, no dual clip).

    Args:
        log_probs, old_log_probs, advantages: [B, R] arrays.
        clip_ratio_low, clip_ratio_high: the ratio is clipped to [1 - low, 1 + high] (asymmetric bounds
            give DAPO's "clip-higher").
        clip_ratio_c: the dual-clip bound (> 1), or None for no dual clip (the plain PPO surrogate).

    Returns:
        (loss, clipped, dual_clipped), all [B, R]: the per-token loss; 1.0 where the clipped term won
        (``pg2 > pg1``, the same indicator with or without dual clip, as verl's ``pg_clipfrac``); 1.0 where
        ``A < 0`` and the dual-clip bound was active (``max(pg1, pg2) > -A * c``, verl's
        ``pg_clipfrac_lower``), all zeros when ``clip_ratio_c`` is None.
    """
    _check_clip_ratio_c(clip_ratio_c)
    log_ratio = log_probs - old_log_probs
    ratio = jnp.exp(jnp.clip(log_ratio, -MAX_LOG_RATIO, MAX_LOG_RATIO))
    pg1 = -advantages * ratio
    pg2 = -advantages * jnp.clip(ratio, 1.0 - clip_ratio_low, 1.0 + clip_ratio_high)
    loss = jnp.maximum(pg1, pg2)
    clipped = (pg2 > pg1).astype(log_probs.dtype)
    if clip_ratio_c is None:
        return loss, clipped, jnp.zeros_like(clipped)
    pg3 = -advantages * clip_ratio_c
    negative = advantages < 0
    dual_clipped = (negative & (loss > pg3)).astype(log_probs.dtype)
    return jnp.where(negative, jnp.minimum(loss, pg3), loss), clipped, dual_clipped


@register_policy_loss("vanilla")
def vanilla_loss(inputs: PolicyLossInputs, config: PolicyLossConfig) -> tuple[jax.Array, dict[str, jax.Array]]:
    """PPO's clipped surrogate, with dual clip when ``clip_ratio_c`` is set (:func:`policy_loss_per_token`)."""
    loss, clipped, dual = policy_loss_per_token(
        inputs.log_probs,
        inputs.old_log_probs,
        inputs.advantages,
        clip_ratio_low=config.clip_ratio_low,
        clip_ratio_high=config.clip_ratio_high,
        clip_ratio_c=config.clip_ratio_c,
    )
    return loss, {"pg_clipfrac": clipped, "pg_clipfrac_lower": dual}


@register_policy_loss("gspo")
def gspo_loss(inputs: PolicyLossInputs, config: PolicyLossConfig) -> tuple[jax.Array, dict[str, jax.Array]]:
    """GSPO (Zheng et al. 2025, "Group Sequence Policy Optimization"), in its token form: the sequence ratio
    ``s_i = exp(mean_t log r_it)`` (the geometric mean of the token ratios), clipped to ``[1 - gspo_clip_ratio_low,
    1 + gspo_clip_ratio_high]``, as the PPO surrogate of every token of the sequence, with the token's gradient
    ``s_i * grad log pi_t`` (``s_it = sg(s_i) * pi_t / sg(pi_t)``). With ``loss_agg_mode=seq-mean-token-mean`` this
    is the paper's sequence objective exactly.

    The mean is over the tokens' unclipped log-ratios; only the mean is clipped to +-:data:`MAX_LOG_RATIO` before
    ``exp``. Clipping the tokens first would move ``s_i`` whenever one token's log-ratio is beyond the bound: 20
    tokens, one at log-ratio 60 and 19 at ``-0.8 / 19``, have the mean ``(60 - 0.8) / 20 = 2.96`` (``s = 19.298``),
    not ``(20 - 0.8) / 20 = 0.96`` (``s = 2.612``).

    Worked example, range [0.9997, 1.0004], one sequence of two tokens, log-ratios ``0.001`` and ``-0.003``:
    mean ``-0.001``, ``s = 0.9990005``; with ``A = 1`` the clipped term wins (``max(-0.9990, -0.9997) = -0.9990``,
    not clipped: ``-A s > -A clip(s)``), with ``A = -1`` it is clipped (loss ``0.9997``, gradient 0).
    """
    sequences = _require_sequences(inputs, "gspo")
    log_ratio = jax.lax.stop_gradient(inputs.log_probs - inputs.old_log_probs)
    seq_log_ratio = jnp.clip(sequence_mean_per_slot(log_ratio, inputs.mask, sequences), -MAX_LOG_RATIO, MAX_LOG_RATIO)
    token_ratio = jnp.exp(
        jax.lax.stop_gradient(seq_log_ratio) + inputs.log_probs - jax.lax.stop_gradient(inputs.log_probs)
    )
    low, high = 1.0 - config.gspo_clip_ratio_low, 1.0 + config.gspo_clip_ratio_high
    pg1 = -inputs.advantages * token_ratio
    pg2 = -inputs.advantages * jnp.clip(token_ratio, low, high)
    clipped = (pg2 > pg1).astype(pg1.dtype)
    return jnp.maximum(pg1, pg2), {"pg_clipfrac": clipped, "pg_clipfrac_lower": jnp.zeros_like(clipped)}


@register_policy_loss("cispo")
def cispo_loss(inputs: PolicyLossInputs, config: PolicyLossConfig) -> tuple[jax.Array, dict[str, jax.Array]]:
    """CISPO (MiniMax-M1, 2025): ``-sg(clip(r, 1 - low, 1 + high)) * A * log pi``. PPO's clip zeroes the gradient
    of a token whose ratio left the range (often the rare "fork" tokens reasoning needs); CISPO clips only the
    importance weight, so every token passes ``-w * A * grad log pi``.

    Worked example, range [0.8, 1.2]: ``A = 1``, log-ratio ``ln 1.5`` (r = 1.5): weight 1.2, loss
    ``-1.2 * log pi``, gradient ``-1.2`` per unit of ``log pi`` (PPO: 0, clipped); ``A = -1``, r = 1: weight 1,
    gradient ``+1``.
    """
    ratio = jnp.exp(inputs.log_ratio())
    weight = jax.lax.stop_gradient(jnp.clip(ratio, 1.0 - config.clip_ratio_low, 1.0 + config.clip_ratio_high))
    loss = -inputs.advantages * weight * inputs.log_probs
    clipped = (jnp.abs(weight - ratio) > 0).astype(loss.dtype)
    return loss, {"pg_clipfrac": clipped, "pg_clipfrac_lower": jnp.zeros_like(clipped)}


@register_policy_loss("geo_mean")
def geo_mean_loss(inputs: PolicyLossInputs, config: PolicyLossConfig) -> tuple[jax.Array, dict[str, jax.Array]]:
    """GMPO (Zhao et al. 2025, "Geometric-Mean Policy Optimization"): a sequence's objective is ``A_i`` times the
    geometric mean of its token ratios, each clipped pessimistically in log space to ``[-geo_mean_clip_log_low,
    geo_mean_clip_log_high]`` (for ``A > 0`` the smaller of ``log r`` and its clip, for ``A < 0`` the larger). The
    geometric mean is less moved by one outlier token than GRPO's arithmetic mean. Every token of sequence ``i``
    carries ``-A_i * exp(mean_t chosen_t)`` (``A_i`` the sequence's mean advantage), so ``seq-mean-token-mean``
    aggregation gives the paper's objective.

    ``chosen_t`` comes from the token's unclipped log-ratio (the pessimistic side of a log-ratio beyond the range is
    that log-ratio itself: -60 for ``A > 0``); only the mean is clipped to +-:data:`MAX_LOG_RATIO` before ``exp``,
    and where that bound is active the sequence's loss is constant (no gradient).

    Worked example, range [-0.4, 0.4], token log-ratios ``[0.5, -0.1]``: ``A = 1``: chosen ``[0.4, -0.1]``, mean
    0.15, loss ``-exp(0.15) = -1.1618`` (token 0 clipped); ``A = -1``: chosen ``[0.5, -0.1]``, mean 0.2, loss
    ``exp(0.2) = 1.2214`` (nothing clipped). 20 tokens with ``A = 1``, one at log-ratio -60 and 19 at ``0.8 / 19``:
    chosen is the log-ratios themselves, mean ``(-60 + 0.8) / 20 = -2.96``, loss ``-exp(-2.96) = -0.0518``.
    """
    sequences = _require_sequences(inputs, "geo_mean")
    log_ratio = inputs.log_probs - inputs.old_log_probs
    advantage = sequence_mean_per_slot(inputs.advantages, inputs.mask, sequences)
    sign = jnp.sign(advantage)
    bounded = jnp.clip(log_ratio, -config.geo_mean_clip_log_low, config.geo_mean_clip_log_high)
    chosen = sign * jnp.minimum(sign * log_ratio, sign * bounded)
    seq_log_ratio = jnp.clip(sequence_mean_per_slot(chosen, inputs.mask, sequences), -MAX_LOG_RATIO, MAX_LOG_RATIO)
    clipped = ((chosen != log_ratio) & (sign != 0)).astype(log_ratio.dtype)  # A = 0: nothing to clip
    return -advantage * jnp.exp(seq_log_ratio), {"pg_clipfrac": clipped, "pg_clipfrac_lower": jnp.zeros_like(clipped)}


def abs_zero_grad(x: jax.Array) -> jax.Array:
    """``|x|`` whose gradient at 0 is 0 (``jnp.abs``'s is 1 there): a penalty on ``|log ratio|`` must not push a
    token whose ratio is exactly 1 (every token of an on-policy step). Gradient ``sign(x)``: -1, 0 or 1."""
    return x * jax.lax.stop_gradient(jnp.sign(x))


def token_covariance(inputs: PolicyLossInputs) -> jax.Array:
    """Each response token's centred product ``(A_t - mean A) * (log pi_t - mean log pi)``, means over the
    micro-batch's response tokens (no gradient): Cui et al.'s measure of how much a token drives entropy down.

    Worked example: advantages ``[1, -1]``, log-probs ``[-0.5, -1.5]`` -> ``[1 * 0.5, -1 * -0.5] = [0.5, 0.5]``.
    """
    mask = inputs.mask.astype(inputs.log_probs.dtype)
    count = jnp.maximum(jnp.sum(mask), 1.0)
    log_probs = jax.lax.stop_gradient(inputs.log_probs)
    centred_a = inputs.advantages - jnp.sum(inputs.advantages * mask) / count
    centred_lp = log_probs - jnp.sum(log_probs * mask) / count
    return jax.lax.stop_gradient(centred_a * centred_lp)


def _first_by_key(key: jax.Array, eligible: jax.Array, count: jax.Array) -> jax.Array:
    """The ``count`` eligible entries with the smallest ``key`` (ties by position), as a 0/1 mask."""
    flat = jnp.where(eligible, key, jnp.inf).reshape(-1)
    rank = jnp.argsort(jnp.argsort(flat, stable=True), stable=True).reshape(key.shape)
    return eligible & (rank < count)


def _share_count(mask: jax.Array, share: float) -> jax.Array:
    """``max(floor(share * tokens), 1)`` response tokens of the micro-batch."""
    return jnp.maximum(jnp.floor(share * jnp.sum(mask)), 1.0)


@register_policy_loss("clip_cov")
def clip_cov_loss(inputs: PolicyLossInputs, config: PolicyLossConfig) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Clip-Cov (Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning Language
    Models"): PPO's clipped loss, and among the tokens it did not clip and whose :func:`token_covariance` lies in
    ``(clip_cov_lb, clip_cov_ub)``, ``clip_cov_ratio`` of the micro-batch's tokens (at least one) drawn at random
    lose their gradient (the loss value is kept: ``stop_gradient``). Those high-covariance tokens are the ones
    whose updates collapse the entropy.

    Worked example: 4 tokens, covariances ``[0.5, 2, 3, 9]``, band (1, 5), ratio 0.25 -> 1 token: token 1 or 2
    (chosen at random) keeps its loss value and gets no gradient; tokens 0 and 3 are outside the band.
    """
    if inputs.rng is None:
        raise ValueError("policy loss 'clip_cov' draws its tokens at random: it needs an rng")
    loss, indicators = vanilla_loss(inputs, replace(config, clip_ratio_c=None))
    clipped = indicators["pg_clipfrac"]
    cov = token_covariance(inputs)
    eligible = (inputs.mask > 0) & (clipped == 0) & (cov > config.clip_cov_lb) & (cov < config.clip_cov_ub)
    draw = jax.random.uniform(inputs.rng, cov.shape)
    cut = _first_by_key(draw, eligible, _share_count(inputs.mask, config.clip_cov_ratio))
    loss = jnp.where(cut, jax.lax.stop_gradient(loss), loss)
    return loss, {"pg_clipfrac": clipped, "pg_clipfrac_lower": jnp.zeros_like(clipped), "pg_cov_selected": cut * 1.0}


@register_policy_loss("kl_cov")
def kl_cov_loss(inputs: PolicyLossInputs, config: PolicyLossConfig) -> tuple[jax.Array, dict[str, jax.Array]]:
    """KL-Cov (Cui et al. 2025): no ratio clipping; the ``kl_cov_ratio`` share of the micro-batch's tokens (at
    least one) with the largest :func:`token_covariance` get ``kl_cov_coef * |log r|`` added to ``-A * r``, which
    holds exactly the entropy-collapsing tokens near the old policy.

    Worked example: 3 tokens, ``A = [1, 1, -2]`` (mean 0), log-probs ``[-0.2, -1.0, -0.6]`` (mean -0.6), so
    covariances ``[0.4, -0.4, 0]``; log-ratios ``[0.1, -0.2, 0]``, ratio 0.34 (1 token), coefficient 1: token 0
    is penalised, ``-exp(0.1) + 0.1 = -1.00517``; token 1 ``-exp(-0.2) = -0.81873``; token 2 ``2 * exp(0) = 2``.
    """
    log_ratio = inputs.log_ratio()
    loss = -inputs.advantages * jnp.exp(log_ratio)
    cov = token_covariance(inputs)
    penalised = _first_by_key(-cov, inputs.mask > 0, _share_count(inputs.mask, config.kl_cov_ratio))
    loss = loss + jnp.where(penalised, config.kl_cov_coef * abs_zero_grad(log_ratio), 0.0)
    zeros = jnp.zeros_like(loss)
    return loss, {"pg_clipfrac": zeros, "pg_clipfrac_lower": zeros, "pg_cov_selected": penalised * 1.0}
