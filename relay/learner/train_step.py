"""One optimizer step as one jitted function: micro-batch gradients accumulated by ``lax.scan``.

The mini-batch arrives stacked as ``[accum, micro, ...]``. The scan runs the micro-batches one
after another inside the compiled program (no Python loop, no re-tracing per micro-batch), adding
their gradients and metrics; the optimizer update follows in the same program, with the old
params and optimizer state donated so a step does not hold two copies of them.

The loss of every micro-batch is a sum divided by the WHOLE mini-batch's token / sequence count,
computed inside the step from the full ``response_mask`` (on several hosts, from the global array),
so the accumulated gradient equals the full-batch gradient whatever the micro-batch size.

With ``compute_dtype=bfloat16`` the float32 master params (and the optimizer state) stay float32;
the forward/backward runs on a bfloat16 copy and the gradients come back float32.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

from relay.learner.grpo_loss import LossSettings, micro_batch_loss
from relay.models.llama_flax import LlamaForCausalLM


def _add(a: Any, b: Any) -> Any:
    return jax.tree_util.tree_map(jnp.add, a, b)


def make_accumulate(
    model: LlamaForCausalLM, settings: LossSettings, prompt_length: int, compute_dtype: Any = jnp.float32
) -> Callable:
    """``accumulate(params, batch) -> (grads, metric_sums, log_probs[accum, micro, R])``."""

    def loss_fn(params: Any, micro: dict, tokens: jax.Array, sequences: jax.Array) -> tuple:
        compute = jax.tree_util.tree_map(lambda p: p.astype(compute_dtype), params)
        return micro_batch_loss(
            compute, micro, tokens, sequences, model=model, prompt_length=prompt_length, settings=settings
        )

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def accumulate(params: Any, batch: dict[str, jax.Array]) -> tuple[Any, dict, jax.Array]:
        mask = batch["response_mask"]
        tokens = jnp.maximum(jnp.sum(mask), 1.0)
        sequences = jnp.float32(mask.shape[0] * mask.shape[1])
        first = jax.tree_util.tree_map(lambda x: x[0], batch)
        _, aux_shape = jax.eval_shape(loss_fn, params, first, tokens, sequences)
        zero_metrics = {k: jnp.zeros((), jnp.float32) for k in aux_shape if k != "log_probs"}
        zero_grads = jax.tree_util.tree_map(jnp.zeros_like, params)

        def body(carry: tuple, micro: dict) -> tuple:
            grads, sums = carry
            (_, aux), g = grad_fn(params, micro, tokens, sequences)
            log_probs = aux.pop("log_probs")
            aux = {k: v.astype(jnp.float32) for k, v in aux.items()}
            return (_add(grads, g), _add(sums, aux)), log_probs

        (grads, sums), log_probs = jax.lax.scan(body, (zero_grads, zero_metrics), batch)
        return grads, sums, log_probs

    return accumulate


def make_train_step(
    model: LlamaForCausalLM,
    tx: optax.GradientTransformation,
    settings: LossSettings,
    prompt_length: int,
    compute_dtype: Any = jnp.float32,
) -> Callable:
    """``step(params, opt_state, batch) -> (params, opt_state, metric_sums, log_probs, grad_norm)``."""
    accumulate = make_accumulate(model, settings, prompt_length, compute_dtype)

    def step(params: Any, opt_state: Any, batch: dict[str, jax.Array]) -> tuple:
        grads, sums, log_probs = accumulate(params, batch)
        grad_norm = optax.tree.norm(grads)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, sums, log_probs, grad_norm

    return step


def stack_micro_batches(arrays: dict[str, Any], micro: int) -> dict[str, Any]:
    """``[accum * micro, ...]`` -> ``[accum, micro, ...]`` (rows keep their order)."""
    return {k: v.reshape(v.shape[0] // micro, micro, *v.shape[1:]) for k, v in arrays.items()}
