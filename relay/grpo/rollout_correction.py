"""Rollout correction: weights and masks for tokens the rollout engine sampled with other probabilities than the
learner's old policy assigns them (kernels, precision, or off-policy samples under ``trainer.max_staleness``).

All jittable, no gradient (they are functions of old and rollout log-probs only). ``ratio_t = pi_old(y_t) /
pi_rollout(y_t) = exp(old_t - rollout_t)``; a sequence's ratio is the product of its token ratios or their
geometric mean. Tokens may be packed several sequences to a row: ``slot_sequence`` numbers them
(:mod:`relay.packing`).

- ``algorithm.rollout_is``: ``tis`` weights each token's loss by ``min(ratio_t, cap)`` (:func:`truncated_is_weights`);
  ``seq_tis`` by the sequence's ``min(prod_t ratio_t, cap)``; ``seq_geo_tis`` by ``min(exp(mean_t log ratio_t), cap)``
  (length-neutral).
- ``algorithm.rollout_token_mask`` (IcePop, 2025): tokens whose ratio is outside ``[low, high]`` get no loss.
- ``algorithm.rollout_seq_reject``: whole sequences whose product or geometric-mean ratio is outside
  ``[low, high]`` get no loss.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from relay.grpo.log_ratio import MAX_LOG_RATIO
from relay.grpo.policy_losses import sequence_mean_per_slot, sequence_sum_per_slot

# algorithm.rollout_is's and algorithm.rollout_seq_reject.ratio's choices (relay/config/validate_algorithm.py reads
# them).
SEQUENCE_IS_MODES = ("seq_tis", "seq_geo_tis")
ROLLOUT_IS_MODES = ("none", "tis", *SEQUENCE_IS_MODES)
SEQUENCE_RATIOS = ("geometric", "product")


def truncated_is_weights(old_log_probs: jax.Array, rollout_log_probs: jax.Array, cap: float) -> jax.Array:
    """Per-token truncated importance weights ``min(exp(old - rollout), cap)`` (no gradient): ``rollout_is=tis``.

    They correct the policy loss for tokens the rollout engine sampled with slightly different
    probabilities than the learner's old policy assigns (kernels, precision). Worked example:
    old -1.0, rollout -1.5 -> exp(0.5) = 1.6487; with cap 1.5 -> 1.5; old -2.0, rollout -1.0 -> 0.3679.
    """
    return jax.lax.stop_gradient(jnp.minimum(jnp.exp(old_log_probs - rollout_log_probs), cap))


def sequence_log_ratio(
    old_log_probs: jax.Array, rollout_log_probs: jax.Array, mask: jax.Array, slot_sequence: jax.Array, kind: str
) -> jax.Array:
    """Per token, the log of its sequence's ratio: the sum (``product``) or mean (``geometric``) of the token
    log-ratios ``old - rollout`` over the sequence's response tokens, then clipped to +-:data:`MAX_LOG_RATIO` (the
    tokens' own log-ratios are not clipped first).

    Worked example: one sequence of log-ratios ``[0.2, -0.1, 0.5]`` -> product ``0.6`` (ratio 1.822), geometric
    ``0.2`` (ratio 1.221) on each of its tokens.
    """
    if kind not in SEQUENCE_RATIOS:
        raise ValueError(f"sequence ratio '{kind}': must be one of {SEQUENCE_RATIOS}")
    log_ratio = old_log_probs - rollout_log_probs
    reduce = sequence_mean_per_slot if kind == "geometric" else sequence_sum_per_slot
    return jax.lax.stop_gradient(jnp.clip(reduce(log_ratio, mask, slot_sequence), -MAX_LOG_RATIO, MAX_LOG_RATIO))


def sequence_is_weights(
    old_log_probs: jax.Array,
    rollout_log_probs: jax.Array,
    mask: jax.Array,
    slot_sequence: jax.Array,
    mode: str,
    cap: float,
) -> jax.Array:
    """Per token, its sequence's truncated IS weight: ``min(prod_t ratio_t, cap)`` (``seq_tis``) or
    ``min(exp(mean_t log ratio_t), cap)`` (``seq_geo_tis``).

    Worked example, cap 2, log-ratios ``[0.2, -0.1, 0.5]``: ``seq_tis`` ``min(exp(0.6), 2) = 1.822``,
    ``seq_geo_tis`` ``exp(0.2) = 1.221``; with log-ratios ``[0.5, 0.5, 0.5]`` ``seq_tis`` is capped at 2.
    """
    kind = {"seq_tis": "product", "seq_geo_tis": "geometric"}.get(mode)
    if kind is None:
        raise ValueError(f"sequence IS mode '{mode}': must be one of {SEQUENCE_IS_MODES}")
    return jnp.minimum(jnp.exp(sequence_log_ratio(old_log_probs, rollout_log_probs, mask, slot_sequence, kind)), cap)


def token_outside(old_log_probs: jax.Array, rollout_log_probs: jax.Array, low: float, high: float) -> jax.Array:
    """1.0 where a token's ratio ``exp(old - rollout)`` is outside ``[low, high]`` (IcePop's masked tokens).

    Worked example, bounds [0.5, 2]: log-ratios ``[0.0, 0.8, -0.8]`` (ratios 1, 2.23, 0.45) -> ``[0, 1, 1]``.
    """
    log_ratio = jax.lax.stop_gradient(old_log_probs - rollout_log_probs)
    return ((log_ratio < jnp.log(low)) | (log_ratio > jnp.log(high))).astype(old_log_probs.dtype)


def sequence_outside(
    old_log_probs: jax.Array,
    rollout_log_probs: jax.Array,
    mask: jax.Array,
    slot_sequence: jax.Array,
    kind: str,
    low: float,
    high: float,
) -> jax.Array:
    """1.0 on every token of a sequence whose ``kind`` ratio (:func:`sequence_log_ratio`) is outside
    ``[low, high]`` (rejected sequences).

    Worked example, geometric, bounds [0.5, 2]: log-ratios ``[0.2, -0.1, 0.5]`` (ratio 1.221) -> kept;
    ``[1.0, 0.5]`` (mean 0.75, ratio 2.117) -> rejected.
    """
    log_ratio = sequence_log_ratio(old_log_probs, rollout_log_probs, mask, slot_sequence, kind)
    return ((log_ratio < jnp.log(low)) | (log_ratio > jnp.log(high))).astype(old_log_probs.dtype)
