"""One optimizer step as one jitted function: micro-batch gradients accumulated in a device-side loop.

The mini-batch arrives in the row layout of :mod:`relay.packing`, stacked as ``[accum, micro, ...]``
with ``accum`` an upper bound (one sequence per row). A ``fori_loop`` runs only the micro-batches that hold
rows (their count is read from ``segment_ids`` inside the program, so a step that packed into fewer rows
does no work on the empty ones and does not compile a new program), adding their gradients and metrics
(:func:`micro_batch_step`, the loop's body); the optimizer update follows in the same program, with the old
params and optimizer state donated so a step does not hold two copies of them.

The loss of every micro-batch is a sum divided by the WHOLE mini-batch's token / sequence count,
computed inside the step from the full ``slot_mask`` / ``row_sequences`` (on several hosts, from the
global arrays), so the accumulated gradient equals the full-batch gradient whatever the micro-batch size.

With ``compute_dtype=bfloat16`` the float32 master params (and the optimizer state) stay float32;
the forward/backward runs on a bfloat16 copy and the gradients come back float32.

Guards, inside the same program (no host round trip):

- the per-token float inputs (advantages and the ref / old / rollout log-probs) are zeroed with
  ``where`` on padding slots before the loss, so junk (even NaN or inf) where ``slot_mask`` is
  0 reaches neither the loss nor its gradient (a product with the mask would not do: ``NaN * 0 = NaN``);
- a step whose summed loss, gradient norm or any gradient is non-finite keeps the old params and
  optimizer state (``lax.cond`` skips the optimizer update; the optimizer's own step count does not
  advance either) and reports ``skipped = 1``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

from relay.learner.grpo_loss import LossSettings, micro_batch_loss, reference_variables
from relay.learner.inputs import LOG_PROB_KEYS
from relay.learner.layerwise_grad import make_layerwise_grads
from relay.models.llama_flax import LlamaForCausalLM

# Per-token float inputs of the loss; their padding positions are replaced by 0 before use.
PER_TOKEN_INPUTS = ("advantages", *LOG_PROB_KEYS)


def _add(a: Any, b: Any) -> Any:
    return jax.tree_util.tree_map(jnp.add, a, b)


def mask_padding(batch: dict[str, jax.Array]) -> dict[str, jax.Array]:
    """``batch`` with every :data:`PER_TOKEN_INPUTS` array set to 0 where ``slot_mask`` is not > 0.

    Uses ``jnp.where``, not a product, so a NaN or inf on a padding position is replaced rather than
    turned into ``NaN * 0 = NaN``; values on response tokens pass through unchanged (a non-finite one
    there still makes the loss non-finite, and the step is skipped).

    Worked example: ``slot_mask = [1, 1, 0]``, ``advantages = [0.5, -1, nan]`` -> ``[0.5, -1, 0]``.
    """
    keep = batch["slot_mask"] > 0
    return {k: jnp.where(keep, v, jnp.zeros((), v.dtype)) if k in PER_TOKEN_INPUTS else v for k, v in batch.items()}


def tree_all_finite(tree: Any) -> jax.Array:
    """A boolean scalar: True when every element of every leaf of ``tree`` is finite (True for no leaves).

    Worked example: ``{"a": [1., 2.], "b": 3.}`` -> True; ``{"a": [1., nan], "b": 3.}`` -> False;
    ``[inf]`` -> False.
    """
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree_util.tree_leaves(tree)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.bool_(True)


def model_variables(trainable: Any, frozen: Any = None) -> dict[str, Any]:
    """The flax variables of a forward: ``{"params": trainable}`` in full fine-tuning (``frozen`` None), else
    ``{"params": frozen, "lora": trainable}`` (LoRA: the base weights frozen, the adapters trained;
    :mod:`relay.models.lora`)."""
    return {"params": trainable} if frozen is None else {"params": frozen, "lora": trainable}


def micro_batch_step(i: jax.Array, carry: tuple, *, batch: dict, rng: jax.Array, add_grads: Callable) -> tuple:
    """The body of the compiled loop over micro-batches: micro-batch ``i`` of ``batch`` (``[accum, micro, ...]``).

    ``carry`` is ``(grads, metric_sums, log_probs)``; ``add_grads(grads, micro, rng)`` returns ``(aux, grads +
    the micro-batch's gradients)`` (:func:`make_accumulate`). The micro-batch's dropout key is ``rng`` folded with
    ``i``; its metrics are added to the sums in float32, and its per-slot log-probs are written at index ``i``."""
    grads, sums, log_probs = carry
    micro = jax.tree_util.tree_map(lambda x: jax.lax.dynamic_index_in_dim(x, i, keepdims=False), batch)
    aux, grads = add_grads(grads, micro, jax.random.fold_in(rng, i))
    lp = aux.pop("log_probs").astype(jnp.float32)
    aux = {k: v.astype(jnp.float32) for k, v in aux.items()}
    log_probs = jax.lax.dynamic_update_index_in_dim(log_probs, lp, i, 0)
    return grads, _add(sums, aux), log_probs


def make_accumulate(
    model: LlamaForCausalLM, settings: LossSettings, compute_dtype: Any = jnp.float32, layerwise: bool = False
) -> Callable:
    """``accumulate(trainable, batch, rng, frozen) -> (grads, metric_sums, log_probs[accum, micro, K])``; the
    gradients are those of ``trainable`` (the params, or the LoRA adapters). ``frozen`` holds what is read but
    never trained: ``"base"``, the LoRA base weights (:func:`model_variables`), and ``"reference"``, the
    reference params of a full fine-tuning run whose learner computes the reference log-probs
    (:func:`reference_variables`); ``{}`` when neither. Log-probs of micro-batches that hold no rows stay 0.
    ``rng``: a PRNG key, folded with the micro-batch index for the LoRA adapters' dropout (unused without it).

    ``layerwise`` (full fine-tuning with stacked layers): each micro-batch's gradients are added into the
    accumulator layer by layer (:mod:`relay.learner.layerwise_grad`) instead of coming back as a second
    model-sized tree; the same numbers up to summation order, one gradient buffer less."""

    def loss_fn(
        trainable: Any, frozen: dict, micro: dict, tokens: jax.Array, sequences: jax.Array, rng: jax.Array
    ) -> tuple:
        cast = lambda tree: jax.tree_util.tree_map(lambda p: p.astype(compute_dtype), tree)  # noqa: E731
        base = frozen.get("base")
        variables = model_variables(cast(trainable), None if base is None else cast(base))
        reference = cast(reference_variables(frozen)) if settings.ref_in_learner else None
        return micro_batch_loss(
            variables, micro, tokens, sequences, model=model, settings=settings, rng=rng, reference=reference
        )

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
    layer_grads = make_layerwise_grads(model, settings, compute_dtype) if layerwise else None

    def add_micro_grads(
        grads: Any, micro: dict, rng: jax.Array, *, params: Any, frozen: dict, tokens: jax.Array, sequences: jax.Array
    ) -> tuple:
        """``(aux, grads + this micro-batch's gradients)``."""
        if layer_grads is not None:
            _, aux, grads = layer_grads(grads, params, frozen, micro, tokens, sequences, rng)
            return aux, grads
        (_, aux), g = grad_fn(params, frozen, micro, tokens, sequences, rng)
        return aux, _add(grads, g)

    def accumulate(params: Any, batch: dict[str, jax.Array], rng: jax.Array, frozen: dict) -> tuple:
        batch = mask_padding(batch)
        tokens = jnp.maximum(jnp.sum(batch["slot_mask"]), 1.0)
        sequences = jnp.maximum(jnp.sum(batch["row_sequences"]), 1.0)
        # Rows fill the micro-batches from the front: the ones holding any token are a prefix.
        active = jnp.sum(jnp.any(batch["segment_ids"] > 0, axis=(1, 2)).astype(jnp.int32))
        first = jax.tree_util.tree_map(lambda x: x[0], batch)
        _, aux_shape = jax.eval_shape(loss_fn, params, frozen, first, tokens, sequences, rng)
        zero_metrics = {k: jnp.zeros((), jnp.float32) for k in aux_shape if k != "log_probs"}
        zero_grads = jax.tree_util.tree_map(jnp.zeros_like, params)
        zero_log_probs = jnp.zeros(batch["slot_mask"].shape, jnp.float32)

        add_grads = functools.partial(add_micro_grads, params=params, frozen=frozen, tokens=tokens, sequences=sequences)
        body = functools.partial(micro_batch_step, batch=batch, rng=rng, add_grads=add_grads)
        return jax.lax.fori_loop(0, active, body, (zero_grads, zero_metrics, zero_log_probs))

    return accumulate


def make_train_step(
    model: LlamaForCausalLM,
    tx: optax.GradientTransformation,
    settings: LossSettings,
    compute_dtype: Any = jnp.float32,
    layerwise: bool = False,
) -> Callable:
    """``step(params, opt_state, batch, rng, frozen) -> (params, opt_state, metric_sums, log_probs, grad_norm,
    skipped)``; ``rng``, ``frozen`` and ``layerwise`` as in :func:`make_accumulate`. With LoRA ``params`` (and
    ``opt_state``) are the adapters'; ``frozen``'s weights are read but never updated or copied (not donated: they
    outlive the step).

    ``skipped`` is a float32 scalar: 1.0 when the summed loss, the gradient norm or any gradient was
    non-finite, in which case ``params`` and ``opt_state`` come back unchanged; else 0.0.
    """
    accumulate = make_accumulate(model, settings, compute_dtype, layerwise)

    def apply(operands: tuple) -> tuple:
        grads, opt_state, params = operands
        updates, new_opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), new_opt_state

    def keep(operands: tuple) -> tuple:
        _, opt_state, params = operands
        return params, opt_state

    def step(params: Any, opt_state: Any, batch: dict[str, jax.Array], rng: jax.Array, frozen: dict) -> tuple:
        grads, sums, log_probs = accumulate(params, batch, rng, frozen)
        grad_norm = optax.tree.norm(grads)
        finite = tree_all_finite((sums["loss"], grad_norm, grads))
        # A branch, not a select between new and old state: the skipped branch computes nothing, and the
        # applied one may overwrite the donated params and optimizer state in place (no second copy).
        params, opt_state = jax.lax.cond(finite, apply, keep, (grads, opt_state, params))
        skipped = 1.0 - finite.astype(jnp.float32)
        return params, opt_state, sums, log_probs, grad_norm, skipped

    return step


def stack_micro_batches(arrays: dict[str, Any], micro: int) -> dict[str, Any]:
    """``[accum * micro, ...]`` -> ``[accum, micro, ...]`` (rows keep their order)."""
    return {k: v.reshape(v.shape[0] // micro, micro, *v.shape[1:]) for k, v in arrays.items()}
