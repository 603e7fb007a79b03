"""The supervised objective of a warm start: the negative log-likelihood of the trained response tokens.

An SFT batch is laid out as a rollout's (:mod:`relay.packing`): a prompt, then a response whose ``response_mask``
is 1 on the tokens the model is taught to write and 0 on the ones it reads (tool results), so packing, micro-batches
and the row layout are the GRPO update's. Only the loss differs: ``sum(-log p(token) * mask) / tokens``, a sum
over the micro-batch divided by the WHOLE optimizer step's trained-token count, so the micro-batches' losses and
gradients add up to the step's token-mean cross-entropy whatever the micro-batch size or packing.

Worked example: two sequences with trained-token log-probs ``[-1, -2]`` and ``[-3]`` (a tool result between them
masked out) give ``loss = (1 + 2 + 3) / 3 = 2``, ``nll`` the same, and ``perplexity`` is derived from it by the
caller (``exp(2) = 7.39``).
"""

from __future__ import annotations

import jax

from relay.grpo.loss_aggregation import aggregate_token_mean

# LossSettings.objective: the GRPO policy loss (the default) or this module's.
OBJECTIVES = ("grpo", "sft")


def sft_loss(
    log_probs: jax.Array, entropy: jax.Array, mask: jax.Array, global_tokens: jax.Array
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """``(loss, metrics)`` of one micro-batch: ``log_probs``, ``entropy`` and ``mask`` are ``[b, K]`` per response
    slot (``mask`` the batch's ``slot_mask``: 1 on trained tokens); ``global_tokens`` counts the step's trained
    tokens. Metrics: ``loss`` (= ``nll``), ``pg_loss`` (the same, so the GRPO update's loss columns stay
    meaningful), ``entropy`` (token mean) and ``log_probs`` (without a gradient)."""
    nll = aggregate_token_mean(-log_probs, mask, global_tokens)
    metrics = {
        "loss": nll,
        "pg_loss": nll,
        "nll": nll,
        "entropy": aggregate_token_mean(entropy, mask, global_tokens),
        "log_probs": jax.lax.stop_gradient(log_probs),
    }
    return nll, metrics
