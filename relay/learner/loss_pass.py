"""The loss of a batch under the current weights, with no gradient and no update: a warm start's validation loss.

The same row layout, micro-batches and objective as the optimizer step (:mod:`relay.learner.train_step`), so the
validation loss is the training loss's measure on other rows; only the forward runs (no backward, no optimizer).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from relay.learner.grpo_loss import LossSettings, micro_batch_loss
from relay.learner.train_step import mask_padding, model_variables
from relay.models.llama_flax import LlamaForCausalLM


def make_loss_pass(
    model: LlamaForCausalLM, settings: LossSettings, compute_dtype: Any = jnp.float32
) -> Callable[[Any, dict, dict], dict[str, jax.Array]]:
    """``loss_pass(trainable, frozen, batch) -> metric sums`` over the micro-batches of ``batch`` (``[accum, micro,
    ...]``) that hold rows: the step's metrics (``loss`` and the objective's own) as if it were trained on, each
    a sum of micro-batch parts over the whole batch's token count, so they add up to the batch's means."""
    if settings.ref_in_learner:
        raise ValueError("make_loss_pass: a loss pass reads no reference (set ref_in_learner=False)")

    def loss_pass(trainable: Any, frozen: dict, batch: dict[str, jax.Array]) -> dict[str, jax.Array]:
        cast = lambda tree: jax.tree_util.tree_map(lambda p: p.astype(compute_dtype), tree)  # noqa: E731
        base = frozen.get("base")
        variables = model_variables(cast(trainable), None if base is None else cast(base))
        batch = mask_padding(batch)
        tokens = jnp.maximum(jnp.sum(batch["slot_mask"]), 1.0)
        sequences = jnp.maximum(jnp.sum(batch["row_sequences"]), 1.0)
        active = jnp.sum(jnp.any(batch["segment_ids"] > 0, axis=(1, 2)).astype(jnp.int32))

        def metrics(micro: dict) -> dict[str, jax.Array]:
            _, aux = micro_batch_loss(variables, micro, tokens, sequences, model=model, settings=settings)
            return {k: v.astype(jnp.float32) for k, v in aux.items() if k != "log_probs"}

        first = jax.tree_util.tree_map(lambda x: x[0], batch)
        zeros = {k: jnp.zeros((), jnp.float32) for k in jax.eval_shape(metrics, first)}

        def body(i: jax.Array, sums: dict) -> dict:
            micro = jax.tree_util.tree_map(lambda x: jax.lax.dynamic_index_in_dim(x, i, keepdims=False), batch)
            return jax.tree_util.tree_map(jnp.add, sums, metrics(micro))

        return jax.lax.fori_loop(0, active, body, zeros)

    return loss_pass
