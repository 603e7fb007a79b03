"""Llama-family decoder in flax.linen whose parameter tree mirrors HF tensor names and layouts.

One implementation serves every family :class:`~relay.models.llama_config.LlamaConfig` accepts:
Llama (optionally with ``attention_bias``/``mlp_bias``, plain or Llama 3 RoPE), Qwen2 (biases on q/k/v_proj only)
and Qwen3 (per-head RMSNorm on q and k), with GQA, full causal attention and tied or untied embeddings. The
config's ``qkv_bias``/``o_proj_bias``/``mlp_bias`` flags decide which ``Linear`` layers have a ``bias``, and
``qk_norm`` whether ``self_attn`` holds ``q_norm``/``k_norm``.

Linear weights are stored as HF stores them, ``[out_features, in_features]``, so converting
between the learner and the rollout/actor engines is a rename, never a transpose:
``params["model"]["layers_3"]["self_attn"]["q_proj"]["weight"]`` is HF's
``model.layers.3.self_attn.q_proj.weight`` (and ``...["q_proj"]["bias"]`` is ``...q_proj.bias``).

``attention_mask`` is read as segment ids: 0 marks padding, and a position attends to the earlier
positions of its own segment. A plain 0/1 mask is the one-segment case (a left-padded row), and rows
that pack several sequences (:mod:`relay.packing`) number them 1, 2, ... so the mask is
block-diagonal causal: no token sees another sequence. Optional ``branch_ids`` let the samples of one
prompt share a single copy of it (each response sees the prompt and itself;
:func:`relay.models.attention.segment_causal_mask`).

``attention=`` names one of :data:`relay.models.attention.ATTENTION_IMPLEMENTATIONS` (Relay's blockwise XLA
attention, JAX's XLA attention, or cuDNN's fused kernel); :mod:`relay.models.attention` says what each computes.

The model returns final hidden states; the LM head is applied by the caller only at the
positions that need logits (response tokens), which saves a ``[tokens, vocab]`` matmul on
every prompt token.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from relay.models.attention import attention, segment_causal_mask
from relay.models.attention_choice import ATTENTION_IMPLEMENTATIONS
from relay.models.llama_config import LlamaConfig
from relay.models.lora import lora_delta
from relay.models.lora_spec import COLLECTION as LORA_COLLECTION
from relay.models.rope import apply_rope, rope_cos_sin


class Linear(nn.Module):
    """``y = x @ W.T (+ b)`` with ``W`` of shape ``[features, in_features]`` (HF/torch layout); plus
    ``lora_scaling * (x A^T) B^T`` when the ``"lora"`` collection holds this module's ``lora_A``/``lora_B``
    (:mod:`relay.models.lora`). With ``lora_dropout`` > 0 and a ``"dropout"`` rng passed to ``apply`` (the
    learner's training forward; nowhere else), the adapter's input ``x`` is dropped out as PEFT does:
    ``(dropout(x) A^T) B^T``; the base path always sees ``x``."""

    features: int
    use_bias: bool = False
    dtype: jnp.dtype = jnp.float32
    lora_scaling: float = 1.0
    lora_dropout: float = 0.0

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        w = self.param("weight", nn.initializers.normal(0.02), (self.features, x.shape[-1]), self.dtype)
        y = jnp.einsum("...i,oi->...o", x, w.astype(x.dtype))
        if self.use_bias:
            y = y + self.param("bias", nn.initializers.zeros, (self.features,), self.dtype).astype(y.dtype)
        if self.has_variable(LORA_COLLECTION, "lora_A"):
            a, b = self.get_variable(LORA_COLLECTION, "lora_A"), self.get_variable(LORA_COLLECTION, "lora_B")
            if self.lora_dropout > 0 and self.has_rng("dropout"):
                keep = jax.random.bernoulli(self.make_rng("dropout"), 1.0 - self.lora_dropout, x.shape)
                x = jnp.where(keep, x / (1.0 - self.lora_dropout), jnp.zeros((), x.dtype))
            y = y + lora_delta(x, a, b, self.lora_scaling)
        return y


class RMSNorm(nn.Module):
    eps: float

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        w = self.param("weight", nn.initializers.ones, (x.shape[-1],), jnp.float32)
        x32 = x.astype(jnp.float32)
        normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
        return w.astype(x.dtype) * normed.astype(x.dtype)


class LayerModule(nn.Module):
    """What every module inside a decoder layer is built with: the model config, the attention implementation (one of
    ``ATTENTION_IMPLEMENTATIONS``), and the LoRA adapters' scaling and dropout."""

    config: LlamaConfig
    attention: str = "xla"
    lora_scaling: float = 1.0
    lora_dropout: float = 0.0


class Attention(LayerModule):
    @nn.compact
    def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array, mask: jax.Array) -> jax.Array:
        cfg, s, p = self.config, self.lora_scaling, self.lora_dropout
        b, t, _ = x.shape
        hq, hkv, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        lora = {"lora_scaling": s, "lora_dropout": p}
        q = Linear(hq * d, use_bias=cfg.qkv_bias, **lora, name="q_proj")(x).reshape(b, t, hq, d)
        k = Linear(hkv * d, use_bias=cfg.qkv_bias, **lora, name="k_proj")(x).reshape(b, t, hkv, d)
        v = Linear(hkv * d, use_bias=cfg.qkv_bias, **lora, name="v_proj")(x).reshape(b, t, hkv, d)
        if cfg.qk_norm:  # Qwen3: each query and key head normalised over head_dim, before RoPE
            q = RMSNorm(cfg.rms_norm_eps, name="q_norm")(q)
            k = RMSNorm(cfg.rms_norm_eps, name="k_norm")(k)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        out = attention(q, k, v, mask, self.attention).reshape(b, t, hq * d)
        return Linear(cfg.hidden_size, use_bias=cfg.o_proj_bias, **lora, name="o_proj")(out)


class MLP(LayerModule):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        cfg, s, p = self.config, self.lora_scaling, self.lora_dropout
        lora = {"lora_scaling": s, "lora_dropout": p}
        gate = Linear(cfg.intermediate_size, use_bias=cfg.mlp_bias, **lora, name="gate_proj")(x)
        up = Linear(cfg.intermediate_size, use_bias=cfg.mlp_bias, **lora, name="up_proj")(x)
        return Linear(cfg.hidden_size, use_bias=cfg.mlp_bias, **lora, name="down_proj")(jax.nn.silu(gate) * up)


def _decoder_layer(module: nn.Module, x: jax.Array, cos: jax.Array, sin: jax.Array, mask: jax.Array) -> jax.Array:
    """Pre-norm attention then pre-norm MLP, each with a residual; sub-modules named as HF names them."""
    eps, s, p = module.config.rms_norm_eps, module.lora_scaling, module.lora_dropout
    attention = Attention(module.config, module.attention, s, p, name="self_attn")
    x = x + attention(RMSNorm(eps, name="input_layernorm")(x), cos, sin, mask)
    mlp = MLP(module.config, module.attention, s, p, name="mlp")
    return x + mlp(RMSNorm(eps, name="post_attention_layernorm")(x))


class DecoderLayer(LayerModule):
    @nn.compact
    def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array, mask: jax.Array) -> jax.Array:
        return _decoder_layer(self, x, cos, sin, mask)


class ScanStep(LayerModule):
    """One decoder layer as a ``lax.scan`` step, ``(x, cos, sin, mask) -> (x, None)``: :class:`DecoderLayer`'s
    sub-modules under the same names, so a stacked tree holds HF's per-layer names with a leading layer axis."""

    @nn.compact
    def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array, mask: jax.Array) -> tuple[jax.Array, None]:
        return _decoder_layer(self, x, cos, sin, mask), None


# The fields every flax module has (its parent scope and its name), not the model's settings.
FLAX_FIELDS = ("parent", "name")


class ModelModule(nn.Module):
    """What the model and its trunk are built with."""

    config: LlamaConfig
    remat: bool = False
    attention: str = "xla"  # one of ATTENTION_IMPLEMENTATIONS
    scan_layers: bool = False  # stacked layer params, one lax.scan (see LlamaModel)
    lora_scaling: float = 1.0  # alpha / rank of adapters passed as the "lora" collection (relay.models.lora)
    lora_dropout: float = 0.0  # on the adapters' inputs in a forward given a "dropout" rng (the learner's update)

    def model_settings(self) -> dict[str, Any]:
        """The fields above by name, as this module holds them: a :class:`ModelModule` built from them (the trunk
        under :class:`LlamaForCausalLM`) is built like this one."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(ModelModule) if f.name not in FLAX_FIELDS}


class LlamaModel(ModelModule):
    """Embeddings, decoder layers and the final norm: HF's ``model.*`` sub-tree.

    ``scan_layers=False`` keeps one sub-tree per layer (``layers_0`` ... ``layers_{L-1}``, HF's names) and
    unrolls them. ``scan_layers=True`` stores the layers stacked (``params["model"]["layers"]``, every leaf
    ``[L, ...]``; :mod:`relay.models.layer_stack` converts) and runs them as one ``lax.scan``: one compiled
    layer instead of ``L``, and the stacked tree is what the learner keeps, so a step never builds a stacked
    copy of the params (nor of their gradients). ``remat`` (scanned layout only) recomputes each layer in
    the backward pass, keeping only its input ``x``: XLA-CPU's schedulers, given an unrolled loop of 30
    remat'd layers, run recomputations early and keep them alive (measured: ~100 MiB/layer at 4 x 512
    tokens of SmolLM2 beyond 12 layers); a scan body cannot be hoisted that way.
    """

    @nn.compact
    def __call__(
        self,
        input_ids: jax.Array,
        attention_mask: jax.Array,
        position_ids: jax.Array,
        branch_ids: jax.Array | None = None,
    ) -> jax.Array:
        cfg = self.config
        embed = self.param("embed_tokens", nn.initializers.normal(0.02), (cfg.vocab_size, cfg.hidden_size), jnp.float32)
        x = jnp.take(embed, input_ids, axis=0)
        cos, sin = rope_cos_sin(position_ids, cfg)
        mask = segment_causal_mask(attention_mask, branch_ids)
        if self.scan_layers:
            step = nn.remat(ScanStep, prevent_cse=False) if self.remat else ScanStep
            layers = nn.scan(
                step,
                variable_axes={"params": 0, LORA_COLLECTION: 0},
                split_rngs={"params": True, "dropout": True},
                in_axes=(nn.broadcast, nn.broadcast, nn.broadcast),
                length=cfg.num_hidden_layers,
            )
            x, _ = layers(cfg, self.attention, self.lora_scaling, self.lora_dropout, name="layers")(x, cos, sin, mask)
        else:
            for i in range(cfg.num_hidden_layers):
                layer = DecoderLayer(cfg, self.attention, self.lora_scaling, self.lora_dropout, name=f"layers_{i}")
                x = layer(x, cos, sin, mask)
        return RMSNorm(cfg.rms_norm_eps, name="norm")(x)


class LlamaForCausalLM(ModelModule):
    """The trunk under HF's ``model.*`` names; returns final hidden states.

    An untied output projection lives beside it as ``params["lm_head"]["weight"]`` (written by
    the HF converter) and is read with :func:`lm_head_weight`, so callers apply the head only
    where they need logits.
    """

    def setup(self) -> None:
        if self.attention not in ATTENTION_IMPLEMENTATIONS:
            raise ValueError(f"attention={self.attention!r}: must be one of {ATTENTION_IMPLEMENTATIONS}")
        if self.remat and not self.scan_layers:
            raise ValueError("remat=True needs scan_layers=True (stacked layer params; relay.models.layer_stack)")
        self.model = LlamaModel(**self.model_settings())

    def __call__(
        self,
        input_ids: jax.Array,
        attention_mask: jax.Array,
        position_ids: jax.Array,
        branch_ids: jax.Array | None = None,
    ) -> jax.Array:
        """The trunk's final hidden states (:meth:`LlamaModel.__call__`)."""
        return self.model(input_ids, attention_mask, position_ids, branch_ids)


def lm_head_weight(params: dict, config: LlamaConfig) -> jax.Array:
    """The ``[vocab, hidden]`` output projection (the embedding matrix when tied)."""
    if config.tie_word_embeddings:
        return params["model"]["embed_tokens"]
    return params["lm_head"]["weight"]
