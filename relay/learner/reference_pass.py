"""The learner's reference log-probs (``algorithm.ref_log_prob_source`` learner) as a program of their own.

With ``LossSettings.ref_in_learner`` the learner runs :func:`make_reference_pass` on a mini-batch's row layout
before its optimizer step, and hands the result to the step as the batch's ``ref_log_probs`` (the step then
reads them as it reads the actor_ref role's, :func:`step_settings`). Why not inside the step: on a sharded mesh
the reference forward and the policy forward are each a loop of collectives (the layers' all-gathers), and in
one program nothing orders one loop after the other. XLA's CPU runtime starts collectives in program order but
lets them overlap, each blocking a thread of the process's intra-op pool until every peer arrives; with both
loops in flight, the local devices' collectives can hold every pool thread while a peer process waits for a
collective that has no thread left to run in, and the job hangs (docs/architecture.md, "Collectives that
cannot hang"). Two programs run one after the other on each device, so the step starts after the reference
forward has finished.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from relay.learner.grpo_loss import LossSettings, reference_log_probs, reference_variables
from relay.models.llama_flax import LlamaForCausalLM

# The row-layout arrays the reference forward reads (relay.packing); branch_ids only with shared prompts.
FORWARD_KEYS = ("input_ids", "segment_ids", "position_ids", "branch_ids", "slot_index", "targets")


def step_settings(settings: LossSettings) -> LossSettings:
    """The loss settings of the optimizer step's program: with ``ref_in_learner`` the step reads the reference
    log-probs from its batch (where :func:`make_reference_pass` put them) instead of running the forward."""
    return dataclasses.replace(settings, ref_in_learner=False) if settings.ref_in_learner else settings


def make_reference_pass(
    model: LlamaForCausalLM, settings: LossSettings, compute_dtype: Any = jnp.float32
) -> Callable[[dict, dict], jax.Array]:
    """``reference_pass(frozen, batch) -> ref_log_probs [accum, micro, K]`` (float32): the reference forward
    (:func:`relay.learner.grpo_loss.reference_log_probs`, the weights :func:`reference_variables` picks from
    ``frozen``) of every micro-batch of ``batch`` (``[accum, micro, ...]``) that holds rows; the others stay 0."""
    if not settings.ref_in_learner:
        raise ValueError("make_reference_pass: the loss settings do not compute the reference in the learner")

    def reference_pass(frozen: dict, batch: dict[str, jax.Array]) -> jax.Array:
        reference = jax.tree_util.tree_map(lambda p: p.astype(compute_dtype), reference_variables(frozen))
        inputs = {k: batch[k] for k in FORWARD_KEYS if k in batch}
        # Rows fill the micro-batches from the front: the ones holding any token are a prefix.
        active = jnp.sum(jnp.any(batch["segment_ids"] > 0, axis=(1, 2)).astype(jnp.int32))

        def body(i: jax.Array, out: jax.Array) -> jax.Array:
            micro = jax.tree_util.tree_map(lambda x: jax.lax.dynamic_index_in_dim(x, i, keepdims=False), inputs)
            log_probs = reference_log_probs(model, reference, micro, settings).astype(jnp.float32)
            return jax.lax.dynamic_update_index_in_dim(out, log_probs, i, 0)

        zeros = jnp.zeros(batch["slot_index"].shape, jnp.float32)
        return jax.lax.fori_loop(0, active, body, zeros)

    return reference_pass
