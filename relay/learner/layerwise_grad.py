"""Micro-batch gradients added into the step's accumulator layer by layer, with no second gradient buffer.

``jax.grad`` of a micro-batch's loss returns a fresh gradient tree, which the accumulation loop of
:func:`relay.learner.train_step.make_accumulate` then adds to its carry: two model-sized buffers live at once (the
accumulator and one micro-batch's gradients; 0.5 GiB each on SmolLM2, the largest temporaries of the step). Here
the backward pass is written out so that each decoder layer's parameter gradient, one layer at a time, is added
into its slice of the accumulator, which the loop carries and XLA updates in place:

1. forward: the embedding, then a ``lax.scan`` over the stacked layers that keeps each layer's input (what
   ``train.remat`` keeps too), then the final norm, the LM head on the response slots and the loss
   (:func:`relay.learner.grpo_loss.loss_from_log_probs`), the last part under ``jax.vjp``;
2. backward: a reversed ``lax.scan`` over the layers whose carry is the hidden state's cotangent and the stacked
   accumulator: each step recomputes its layer under ``jax.vjp`` from the kept input (remat), and writes
   ``acc[i] + dL/dparams_i`` back into slice ``i``;
3. the embedding's gradient is a scatter-add of the first layer's input cotangent into the accumulator's rows
   (plus the LM head's gradient when the head is the tied embedding), the final norm's an add.

The result equals ``acc + jax.grad(loss)`` up to float summation order (``tests/relay/learner``). It serves full
fine-tuning with ``train.remat`` (the same recomputation); LoRA's adapter gradients are small and keep the
``jax.grad`` path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from relay.learner.grpo_loss import LossSettings, loss_from_log_probs, reference_log_probs, reference_variables
from relay.models.attention import segment_causal_mask
from relay.models.jax_logprobs import gather_slots, slot_log_probs
from relay.models.llama_flax import LlamaForCausalLM, RMSNorm, ScanStep
from relay.models.rope import rope_cos_sin


def make_layerwise_grads(
    model: LlamaForCausalLM, settings: LossSettings, compute_dtype: Any = jnp.float32
) -> Callable[..., tuple[jax.Array, dict, dict]]:
    """``micro_grads(acc, params, frozen, micro, tokens, sequences, rng) -> (loss, aux, acc + grads)`` for one
    micro-batch (arguments as :func:`relay.learner.grpo_loss.micro_batch_loss`'s; ``frozen`` as in
    :func:`relay.learner.train_step.make_accumulate`). ``params`` and ``acc`` are the full fine-tuning param tree
    with stacked layers (``params["model"]["layers"]``, every leaf ``[L, ...]``)."""
    steps = LayerwiseSteps(model, settings, compute_dtype)

    def micro_grads(
        acc: dict, params: dict, frozen: dict, micro: dict, tokens: jax.Array, sequences: jax.Array, rng: jax.Array
    ) -> tuple[jax.Array, dict, dict]:
        trunk = params["model"]
        run_layer = steps.layer_runner(micro)
        last, inputs = steps.forward(trunk, micro["input_ids"], run_layer)
        loss, aux, (g_x, g_norm, g_head) = steps.head_loss_grads(params, frozen, micro, tokens, sequences, rng, last)
        g_x0, acc_layers = steps.backward(acc["model"]["layers"], trunk["layers"], inputs, g_x, run_layer)
        return loss, aux, steps.add_outer_grads(acc, acc_layers, g_x0, micro["input_ids"], g_norm, g_head)

    return micro_grads


class LayerwiseSteps:
    """The steps of :func:`make_layerwise_grads`'s micro-batch, in the order it runs them: the forward over the
    layers, the head and loss with their gradients, the backward over the layers into the accumulator, and the
    embedding, final norm and head gradients added last. Parameters are cast to ``compute_dtype`` where used."""

    def __init__(self, model: LlamaForCausalLM, settings: LossSettings, compute_dtype: Any) -> None:
        self.model = model
        self.settings = settings
        self.compute_dtype = compute_dtype
        self.config = model.config
        self.layer = ScanStep(model.config, model.attention)
        self.final_norm = RMSNorm(model.config.rms_norm_eps)

    def cast(self, tree: Any) -> Any:
        """Every leaf of ``tree`` in the compute dtype."""
        return jax.tree_util.tree_map(lambda p: p.astype(self.compute_dtype), tree)

    def layer_runner(self, micro: dict) -> Callable[[dict, jax.Array], jax.Array]:
        """``run_layer(layer_params, x) -> x``: one decoder layer at the micro-batch's positions (RoPE) and under
        its segment (and branch) attention mask, both computed once here for every layer."""
        cfg = self.config
        cos, sin = rope_cos_sin(micro["position_ids"], cfg)
        mask = segment_causal_mask(micro["segment_ids"], micro.get("branch_ids"))

        def run_layer(p: dict, x: jax.Array) -> jax.Array:
            return self.layer.apply({"params": self.cast(p)}, x, cos, sin, mask)[0]

        return run_layer

    def forward(self, trunk: dict, ids: jax.Array, run_layer: Callable) -> tuple[jax.Array, jax.Array]:
        """The embedding, then every layer: ``(last layer's output, each layer's input [L, ...])``."""

        def forward_step(x: jax.Array, p: dict) -> tuple[jax.Array, jax.Array]:
            return run_layer(p, x), x  # keep the layer's input for its recomputation in the backward pass

        x0 = jnp.take(self.cast(trunk["embed_tokens"]), ids, axis=0)
        return jax.lax.scan(forward_step, x0, trunk["layers"])

    def head_loss_grads(
        self,
        params: dict,
        frozen: dict,
        micro: dict,
        tokens: jax.Array,
        sequences: jax.Array,
        rng: jax.Array,
        last: jax.Array,
    ) -> tuple[jax.Array, dict, tuple[jax.Array, dict, jax.Array]]:
        """The final norm, the LM head on the response slots and the loss from the last layer's output ``last``:
        ``(loss, aux, (dL/dlast, dL/dnorm, dL/dhead))``. The reference log-probs (the learner's own reference
        forward, or the batch's) enter as constants."""
        settings = self.settings
        reference = reference_variables(frozen) if settings.ref_in_learner else None
        ref_log_probs = reference_log_probs(
            self.model, None if reference is None else self.cast(reference), micro, settings
        )
        trunk = params["model"]
        head_weight = trunk["embed_tokens"] if self.config.tie_word_embeddings else params["lm_head"]["weight"]

        def head_loss(x: jax.Array, norm: dict, head: jax.Array) -> tuple[jax.Array, dict]:
            hidden = self.final_norm.apply({"params": self.cast(norm)}, x)
            log_probs, entropy = slot_log_probs(
                gather_slots(hidden, micro["slot_index"]),
                self.cast(head),
                micro["targets"],
                settings.temperature,
                settings.entropy_coeff != 0,
            )
            key = jax.random.fold_in(rng, 1)  # micro_batch_loss's policy-loss key
            return loss_from_log_probs(log_probs, entropy, ref_log_probs, micro, tokens, sequences, settings, key)

        loss, head_vjp, aux = jax.vjp(head_loss, last, trunk["norm"], head_weight, has_aux=True)
        return loss, aux, head_vjp(jnp.ones_like(loss))

    def backward(
        self, acc_layers: dict, layers: dict, inputs: jax.Array, g_x: jax.Array, run_layer: Callable
    ) -> tuple[jax.Array, dict]:
        """The layers in reverse, each recomputed from its kept input under ``jax.vjp``, its parameter gradient
        added into slice ``i`` of ``acc_layers``: ``(dL/d(first layer's input), acc_layers + layer grads)``."""

        def backward_step(carry: tuple, i: jax.Array) -> tuple[tuple, None]:
            g_x, acc_layers = carry
            p_i = jax.tree_util.tree_map(lambda s: jax.lax.dynamic_index_in_dim(s, i, keepdims=False), layers)
            x_i = jax.lax.dynamic_index_in_dim(inputs, i, keepdims=False)
            _, layer_vjp = jax.vjp(run_layer, p_i, x_i)
            g_p, g_x = layer_vjp(g_x)

            def add_slice(a: jax.Array, g: jax.Array) -> jax.Array:
                current = jax.lax.dynamic_index_in_dim(a, i, keepdims=False)
                return jax.lax.dynamic_update_index_in_dim(a, current + g.astype(a.dtype), i, 0)

            return (g_x, jax.tree_util.tree_map(add_slice, acc_layers, g_p)), None

        steps = jnp.arange(self.config.num_hidden_layers)
        (g_x0, acc_layers), _ = jax.lax.scan(backward_step, (g_x, acc_layers), steps, reverse=True)
        return g_x0, acc_layers

    def add_outer_grads(
        self, acc: dict, acc_layers: dict, g_x0: jax.Array, ids: jax.Array, g_norm: dict, g_head: jax.Array
    ) -> dict:
        """``acc`` with the updated layers ``acc_layers`` and the other gradients added: the embedding's (a
        scatter-add of the first layer's input cotangent ``g_x0`` into the rows of ``ids``, plus the head's when
        tied), the LM head's (untied) and the final norm's."""
        acc_trunk = acc["model"]
        embed = acc_trunk["embed_tokens"]
        rows = g_x0.reshape(-1, g_x0.shape[-1]).astype(embed.dtype)
        embed = embed.at[ids.reshape(-1)].add(rows)
        out = dict(acc)
        if self.config.tie_word_embeddings:
            embed = embed + g_head.astype(embed.dtype)
        else:
            out["lm_head"] = {"weight": acc["lm_head"]["weight"] + g_head.astype(embed.dtype)}
        norm = jax.tree_util.tree_map(lambda a, g: a + g.astype(a.dtype), acc_trunk["norm"], g_norm)
        out["model"] = {**acc_trunk, "layers": acc_layers, "embed_tokens": embed, "norm": norm}
        return out
