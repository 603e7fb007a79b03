"""Loss aggregation (``algorithm.loss_agg_mode``): per-token values to a scalar, as sums over the WHOLE batch's
token and sequence counts, so the results of the micro-batches add up to the batch's (gradient accumulation).

All functions are jittable (jax.numpy, the mode is a Python string resolved at trace time).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

# The modes of :func:`aggregate_slot_loss`: ``algorithm.loss_agg_mode``'s choices (relay/config/validate_algorithm.py
# reads them).
LOSS_AGG_MODES = ("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")


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


def aggregate_slot_loss(
    values: jax.Array,
    mask: jax.Array,
    mode: str,
    num_tokens: jax.Array | float,
    num_sequences: jax.Array | float,
    seq_tokens: jax.Array,
    loss_scale_constant: jax.Array | float,
) -> jax.Array:
    """Aggregate per-token ``values`` (any layout: packed rows hold several sequences) into a scalar, as a sum over
    global denominators. ``num_tokens`` / ``num_sequences`` count the WHOLE batch, so micro-batch results add up;
    ``seq_tokens`` (the shape of ``values``) is the token count of the sequence each token belongs to:

    - ``token-mean``: ``sum(v * m) / num_tokens`` (every token weighs the same);
    - ``token-sum``: ``sum(v * m)``, no normaliser (the gradient grows with the batch's token count: scale the
      learning rate with it);
    - ``seq-mean-token-sum``: ``sum_i sum_t v_it m_it / num_sequences`` (long sequences weigh more);
    - ``seq-mean-token-mean``: ``sum_i (sum_t v_it m_it / n_i) / num_sequences`` with ``n_i`` the
      sequence's token count, ``seq_tokens`` (every sequence weighs the same);
    - ``seq-mean-token-sum-norm`` (Dr. GRPO): ``sum_i sum_t v_it m_it / (num_sequences * C)`` with ``C =
      loss_scale_constant``, a FIXED normaliser (the paper uses the maximum generation length; Relay's
      ``derived.loss_scale_constant``). Unlike ``seq-mean-token-mean`` it does not divide a sequence by its own
      length, so a token of a long response weighs as much as a token of a short one, and unlike ``token-mean``
      the denominator does not move with the batch's token count. verl's mode of the same name divides by ``C``
      only, i.e. ``num_sequences`` times this value.

    ``loss_scale_constant`` is ignored by the other modes.

    Worked example: sequence A has token losses [1, 2, 3], sequence B [6], packed into one row ``[1, 2, 3, 6]``
    with ``seq_tokens = [3, 3, 3, 1]`` (4 tokens, 2 sequences, constant 4): token-mean = 12 / 4 = 3; token-sum =
    12; seq-mean-token-sum = (6 + 6) / 2 = 6; seq-mean-token-mean = (1/3 + 2/3 + 3/3 + 6/1) / 2 = 4;
    seq-mean-token-sum-norm = (6 + 6) / (2 * 4) = 1.5. As separate micro-batches with the global counts: A gives
    6 / (2 * 4) = 0.75, B gives 6 / (2 * 4) = 0.75, sum 1.5.
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
