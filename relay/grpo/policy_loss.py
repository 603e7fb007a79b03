"""PPO/GRPO clipped policy-gradient loss with token-mean aggregation over a global denominator.

All functions are jittable (jax.numpy, no Python branching on array values).
"""

from __future__ import annotations

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


LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean")


def aggregate_loss(
    values: jax.Array,
    mask: jax.Array,
    mode: str,
    num_tokens: jax.Array | float,
    num_sequences: jax.Array | float,
) -> jax.Array:
    """Aggregate per-token ``values`` [B, R] into a scalar, as a sum over global denominators.

    ``num_tokens`` / ``num_sequences`` count the WHOLE batch, so micro-batch results add up:

    - ``token-mean``: ``sum(v * m) / num_tokens`` (every token weighs the same);
    - ``seq-mean-token-sum``: ``sum_i sum_t v_it m_it / num_sequences`` (long sequences weigh more);
    - ``seq-mean-token-mean``: ``sum_i (sum_t v_it m_it / n_i) / num_sequences`` with ``n_i`` the
      sequence's token count (every sequence weighs the same).

    Worked example: sequence A has token losses [1, 2, 3], sequence B [6] (4 tokens, 2 sequences):
    token-mean = 12 / 4 = 3; seq-mean-token-sum = (6 + 6) / 2 = 6; seq-mean-token-mean = (2 + 6) / 2 = 4.
    """
    mask = mask.astype(values.dtype)
    if mode == "token-mean":
        return jnp.sum(values * mask) / num_tokens
    per_seq = jnp.sum(values * mask, axis=-1)
    if mode == "seq-mean-token-sum":
        return jnp.sum(per_seq) / num_sequences
    if mode == "seq-mean-token-mean":
        return jnp.sum(per_seq / jnp.maximum(jnp.sum(mask, axis=-1), 1.0)) / num_sequences
    raise ValueError(f"unknown loss_agg_mode '{mode}'; valid: {list(LOSS_AGG_MODES)}")


def clipped_policy_loss_per_token(
    log_probs: jax.Array,
    old_log_probs: jax.Array,
    advantages: jax.Array,
    *,
    clip_ratio_low: float,
    clip_ratio_high: float,
) -> tuple[jax.Array, jax.Array]:
    """Per-token clipped surrogate ``max(-A r, -A clip(r))`` and the 0/1 "clipped term won" indicator."""
    log_ratio = log_probs - old_log_probs
    ratio = jnp.exp(jnp.clip(log_ratio, -_MAX_LOG_RATIO, _MAX_LOG_RATIO))
    pg1 = -advantages * ratio
    pg2 = -advantages * jnp.clip(ratio, 1.0 - clip_ratio_low, 1.0 + clip_ratio_high)
    return jnp.maximum(pg1, pg2), (pg2 > pg1).astype(log_probs.dtype)


def clipped_policy_loss(
    log_probs: jax.Array,
    old_log_probs: jax.Array,
    advantages: jax.Array,
    response_mask: jax.Array,
    *,
    clip_ratio_low: float,
    clip_ratio_high: float,
    loss_denominator: jax.Array | float,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """PPO clipped surrogate loss, token-mean aggregated over ``loss_denominator`` tokens.

    ``ratio = exp(log_probs - old_log_probs)`` (log-ratio clipped to +-20 before exp, as in verl),
    ``pg1 = -A * ratio``, ``pg2 = -A * clip(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)``,
    per-token loss ``max(pg1, pg2)``. Asymmetric bounds give DAPO's "clip-higher".

    Args:
        log_probs, old_log_probs, advantages, response_mask: [B, R] arrays (a micro-batch).
        clip_ratio_low, clip_ratio_high: the ratio is clipped to [1 - low, 1 + high].
        loss_denominator: number of response tokens in the WHOLE batch (not the micro-batch), so the
            losses and metrics of the micro-batches sum to the full-batch values.

    Returns:
        (loss, metrics) with ``metrics["pg_clipfrac"]`` the fraction of tokens where the clipped term
        is the larger one (pg2 > pg1) and ``metrics["ppo_kl"]`` the mean of ``old - new`` log-probs;
        both are sums over ``loss_denominator``, so they too add across micro-batches.
    """
    log_ratio = log_probs - old_log_probs
    ratio = jnp.exp(jnp.clip(log_ratio, -_MAX_LOG_RATIO, _MAX_LOG_RATIO))
    pg1 = -advantages * ratio
    pg2 = -advantages * jnp.clip(ratio, 1.0 - clip_ratio_low, 1.0 + clip_ratio_high)
    loss = aggregate_token_mean(jnp.maximum(pg1, pg2), response_mask, loss_denominator)
    clipped = (pg2 > pg1).astype(log_probs.dtype)
    metrics = {
        "pg_clipfrac": aggregate_token_mean(clipped, response_mask, loss_denominator),
        "ppo_kl": aggregate_token_mean(-log_ratio, response_mask, loss_denominator),
    }
    return loss, metrics


def truncated_is_weights(old_log_probs: jax.Array, rollout_log_probs: jax.Array, cap: float) -> jax.Array:
    """Per-token truncated importance weights ``min(exp(old - rollout), cap)`` (no gradient).

    They correct the policy loss for tokens the rollout engine sampled with slightly different
    probabilities than the learner's old policy assigns (kernels, precision). Worked example:
    old -1.0, rollout -1.5 -> exp(0.5) = 1.6487; with cap 1.5 -> 1.5; old -2.0, rollout -1.0 -> 0.3679.
    """
    return jax.lax.stop_gradient(jnp.minimum(jnp.exp(old_log_probs - rollout_log_probs), cap))
