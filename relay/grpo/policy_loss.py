"""PPO/GRPO clipped policy-gradient loss with token-mean aggregation over a global denominator.

All functions are jittable (jax.numpy, no Python branching on array values).
"""

from __future__ import annotations

import numbers

import jax
import jax.numpy as jnp

# Bound on log(ratio) before exp, as in verl: keeps the ratio finite (exp(20) ~ 4.9e8) for wild tokens.
_MAX_LOG_RATIO = 20.0


def masked_mean(values: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean of ``values`` where ``mask`` is 1, over the local denominator ``max(sum(mask), 1)``."""
    mask = mask.astype(values.dtype)
    return jnp.sum(values * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def aggregate_token_mean(values: jax.Array, mask: jax.Array, denominator: jax.Array | float) -> jax.Array:
    """``sum(values * mask) / denominator``: token-mean written as a sum over a global denominator.

    Pass as ``denominator`` the number of response tokens in the WHOLE batch (must be > 0). Then the
    results of the micro-batches add up exactly to the token-mean of the whole batch, which is what
    gradient accumulation needs; a per-micro-batch mean would weight tokens unequally.

    Worked example: a batch with 3 masked tokens of loss [1, 2, 3] in micro-batch A and 1 token of loss
    [6] in micro-batch B. Token-mean of the batch = (1 + 2 + 3 + 6) / 4 = 3. With the global denominator
    4: A gives 6 / 4 = 1.5, B gives 6 / 4 = 1.5, and 1.5 + 1.5 = 3. Averaging the per-micro-batch means
    instead gives (2 + 6) / 2 = 4, which over-weights the token of the short micro-batch.
    """
    return jnp.sum(values * mask.astype(values.dtype)) / denominator


LOSS_AGG_MODES = ("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def aggregate_loss(
    values: jax.Array,
    mask: jax.Array,
    mode: str,
    num_tokens: jax.Array | float,
    num_sequences: jax.Array | float,
    *,
    loss_scale_constant: jax.Array | float | None = None,
) -> jax.Array:
    """Aggregate per-token ``values`` [B, R] into a scalar, as a sum over global denominators.

    ``num_tokens`` / ``num_sequences`` count the WHOLE batch, so micro-batch results add up:

    - ``token-mean``: ``sum(v * m) / num_tokens`` (every token weighs the same);
    - ``token-sum``: ``sum(v * m)``, no normaliser (the gradient grows with the batch's token count: scale the
      learning rate with it);
    - ``seq-mean-token-sum``: ``sum_i sum_t v_it m_it / num_sequences`` (long sequences weigh more);
    - ``seq-mean-token-mean``: ``sum_i (sum_t v_it m_it / n_i) / num_sequences`` with ``n_i`` the
      sequence's token count (every sequence weighs the same);
    - ``seq-mean-token-sum-norm`` (Dr. GRPO): ``sum_i sum_t v_it m_it / (num_sequences * C)`` with ``C =
      loss_scale_constant``, a FIXED normaliser (the paper uses the maximum generation length). Unlike
      ``seq-mean-token-mean`` it does not divide a sequence by its own length, so a token of a long
      response weighs as much as a token of a short one, and unlike ``token-mean`` the denominator does
      not move with the batch's token count. ``C`` defaults to the response width ``R = values.shape[-1]``;
      every micro-batch of a batch must then have the same width (pass ``C`` explicitly, e.g. the maximum
      response length of the config, if micro-batches are trimmed to different widths). verl's mode of
      the same name divides by ``C`` only, i.e. ``num_sequences`` times this value.

    ``loss_scale_constant`` is ignored by the other modes.

    Worked example: sequence A has token losses [1, 2, 3], sequence B [6] (4 tokens, 2 sequences,
    response width R = 4): token-mean = 12 / 4 = 3; token-sum = 12; seq-mean-token-sum = (6 + 6) / 2 = 6;
    seq-mean-token-mean = (2 + 6) / 2 = 4; seq-mean-token-sum-norm = (6 + 6) / (2 * 4) = 1.5. As separate
    micro-batches with the global counts: A gives 6 / (2 * 4) = 0.75, B gives 6 / (2 * 4) = 0.75, sum 1.5.
    """
    # One sequence per row: every token's sequence length is its row's token count.
    mask = mask.astype(values.dtype)
    seq_tokens = jnp.broadcast_to(jnp.sum(mask, axis=-1, keepdims=True), values.shape)
    constant = values.shape[-1] if loss_scale_constant is None else loss_scale_constant
    return aggregate_slot_loss(values, mask, mode, num_tokens, num_sequences, seq_tokens, constant)


def aggregate_slot_loss(
    values: jax.Array,
    mask: jax.Array,
    mode: str,
    num_tokens: jax.Array | float,
    num_sequences: jax.Array | float,
    seq_tokens: jax.Array,
    loss_scale_constant: jax.Array | float,
) -> jax.Array:
    """:func:`aggregate_loss` for tokens in any layout (packed rows hold several sequences per row).

    A sequence's tokens need not share a row, so the per-sequence division of ``seq-mean-token-mean`` uses
    ``seq_tokens`` (same shape as ``values``: the token count of the sequence each token belongs to);
    the other modes are sums over tokens with global denominators, as in :func:`aggregate_loss`, and
    ``seq-mean-token-sum-norm`` needs its constant explicitly (no response width to default to).

    Worked example (the one of :func:`aggregate_loss`, packed into one row): values ``[1, 2, 3, 6]`` of
    sequences A, A, A, B, ``seq_tokens = [3, 3, 3, 1]``, 4 tokens, 2 sequences, constant 4: token-mean 3,
    seq-mean-token-sum 6, seq-mean-token-mean (1/3 + 2/3 + 3/3 + 6/1) / 2 = 4, seq-mean-token-sum-norm 1.5.
    """
    weighted = values * mask.astype(values.dtype)
    if mode == "token-mean":
        return jnp.sum(weighted) / num_tokens
    if mode == "token-sum":
        return jnp.sum(weighted)
    if mode == "seq-mean-token-sum":
        return jnp.sum(weighted) / num_sequences
    if mode == "seq-mean-token-mean":
        return jnp.sum(weighted / jnp.maximum(seq_tokens, 1.0)) / num_sequences
    if mode == "seq-mean-token-sum-norm":
        return jnp.sum(weighted) / (num_sequences * loss_scale_constant)
    raise ValueError(f"unknown loss_agg_mode '{mode}'; valid: {list(LOSS_AGG_MODES)}")


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

    ``ratio = exp(log_probs - old_log_probs)`` (log-ratio clipped to +-20 before exp, as in verl),
    ``pg1 = -A * ratio``, ``pg2 = -A * clip(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)`` and the
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
    ratio = jnp.exp(jnp.clip(log_ratio, -_MAX_LOG_RATIO, _MAX_LOG_RATIO))
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


def clipped_policy_loss_per_token(
    log_probs: jax.Array,
    old_log_probs: jax.Array,
    advantages: jax.Array,
    *,
    clip_ratio_low: float,
    clip_ratio_high: float,
    clip_ratio_c: float | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Per-token clipped surrogate ``max(-A r, -A clip(r))`` and the 0/1 "clipped term won" indicator.

    A thin wrapper over :func:`policy_loss_per_token` that drops the dual-clip indicator; with
    ``clip_ratio_c`` set, negative-advantage tokens are dual-clipped as described there.
    """
    loss, clipped, _ = policy_loss_per_token(
        log_probs,
        old_log_probs,
        advantages,
        clip_ratio_low=clip_ratio_low,
        clip_ratio_high=clip_ratio_high,
        clip_ratio_c=clip_ratio_c,
    )
    return loss, clipped


def clipped_policy_loss(
    log_probs: jax.Array,
    old_log_probs: jax.Array,
    advantages: jax.Array,
    response_mask: jax.Array,
    *,
    clip_ratio_low: float,
    clip_ratio_high: float,
    loss_denominator: jax.Array | float,
    clip_ratio_c: float | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """PPO clipped surrogate loss, token-mean aggregated over ``loss_denominator`` tokens.

    ``ratio = exp(log_probs - old_log_probs)`` (log-ratio clipped to +-20 before exp, as in verl),
    ``pg1 = -A * ratio``, ``pg2 = -A * clip(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)``,
    per-token loss ``max(pg1, pg2)``. Asymmetric bounds give DAPO's "clip-higher". With
    ``clip_ratio_c`` the negative-advantage tokens are dual-clipped (see :func:`policy_loss_per_token`).

    Args:
        log_probs, old_log_probs, advantages, response_mask: [B, R] arrays (a micro-batch).
        clip_ratio_low, clip_ratio_high: the ratio is clipped to [1 - low, 1 + high].
        loss_denominator: number of response tokens in the WHOLE batch (not the micro-batch), so the
            losses and metrics of the micro-batches sum to the full-batch values.
        clip_ratio_c: the dual-clip bound (> 1), or None (default) for none.

    Returns:
        (loss, metrics) with ``metrics["pg_clipfrac"]`` the fraction of tokens where the clipped term
        is the larger one (pg2 > pg1) and ``metrics["ppo_kl"]`` the mean of ``old - new`` log-probs;
        with ``clip_ratio_c`` also ``metrics["pg_clipfrac_lower"]``, the fraction of tokens where the
        dual-clip bound was active. All are sums over ``loss_denominator``, so they add across micro-batches.
    """
    per_token, clipped, dual_clipped = policy_loss_per_token(
        log_probs,
        old_log_probs,
        advantages,
        clip_ratio_low=clip_ratio_low,
        clip_ratio_high=clip_ratio_high,
        clip_ratio_c=clip_ratio_c,
    )
    loss = aggregate_token_mean(per_token, response_mask, loss_denominator)
    metrics = {
        "pg_clipfrac": aggregate_token_mean(clipped, response_mask, loss_denominator),
        "ppo_kl": aggregate_token_mean(old_log_probs - log_probs, response_mask, loss_denominator),
    }
    if clip_ratio_c is not None:
        metrics["pg_clipfrac_lower"] = aggregate_token_mean(dual_clipped, response_mask, loss_denominator)
    return loss, metrics


def truncated_is_weights(old_log_probs: jax.Array, rollout_log_probs: jax.Array, cap: float) -> jax.Array:
    """Per-token truncated importance weights ``min(exp(old - rollout), cap)`` (no gradient).

    They correct the policy loss for tokens the rollout engine sampled with slightly different
    probabilities than the learner's old policy assigns (kernels, precision). Worked example:
    old -1.0, rollout -1.5 -> exp(0.5) = 1.6487; with cap 1.5 -> 1.5; old -2.0, rollout -1.0 -> 0.3679.
    """
    return jax.lax.stop_gradient(jnp.minimum(jnp.exp(old_log_probs - rollout_log_probs), cap))
