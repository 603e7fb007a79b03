"""Llama-family decoder in flax.linen whose parameter tree mirrors HF tensor names and layouts.

One implementation serves every family :class:`~relay.models.llama_config.LlamaConfig` accepts:
Llama (optionally with ``attention_bias``/``mlp_bias``) and Qwen2 (biases on q/k/v_proj only),
with GQA, plain RoPE, full causal attention and tied or untied embeddings. The config's
``qkv_bias``/``o_proj_bias``/``mlp_bias`` flags decide which ``Linear`` layers have a ``bias``.

Linear weights are stored as HF stores them, ``[out_features, in_features]``, so converting
between the learner and the rollout/actor engines is a rename, never a transpose:
``params["model"]["layers_3"]["self_attn"]["q_proj"]["weight"]`` is HF's
``model.layers.3.self_attn.q_proj.weight`` (and ``...["q_proj"]["bias"]`` is ``...q_proj.bias``).

The model returns final hidden states; the LM head is applied by the caller only at the
positions that need logits (response tokens), which saves a ``[tokens, vocab]`` matmul on
every prompt token.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from relay.models.llama_config import LlamaConfig

_MASK_VALUE = -1e30  # finite, so fully-masked (padding) rows stay finite instead of NaN


class Linear(nn.Module):
    """``y = x @ W.T (+ b)`` with ``W`` of shape ``[features, in_features]`` (HF/torch layout)."""

    features: int
    use_bias: bool = False
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        w = self.param("weight", nn.initializers.normal(0.02), (self.features, x.shape[-1]), self.dtype)
        y = jnp.einsum("...i,oi->...o", x, w.astype(x.dtype))
        if self.use_bias:
            y = y + self.param("bias", nn.initializers.zeros, (self.features,), self.dtype).astype(y.dtype)
        return y


class RMSNorm(nn.Module):
    eps: float

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        w = self.param("weight", nn.initializers.ones, (x.shape[-1],), jnp.float32)
        x32 = x.astype(jnp.float32)
        normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
        return w.astype(x.dtype) * normed.astype(x.dtype)


def rope_cos_sin(position_ids: jax.Array, head_dim: int, theta: float) -> tuple[jax.Array, jax.Array]:
    """HF's default RoPE tables for ``position_ids`` [B, T] -> cos, sin of shape [B, T, head_dim]."""
    inv_freq = 1.0 / (theta ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim))
    freqs = position_ids.astype(jnp.float32)[..., None] * inv_freq
    emb = jnp.concatenate([freqs, freqs], axis=-1)
    return jnp.cos(emb), jnp.sin(emb)


def apply_rope(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotate ``x`` [B, T, H, D] by the half-split convention HF Llama uses."""
    half = x.shape[-1] // 2
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos[:, :, None, :] + rotated * sin[:, :, None, :]


class Attention(nn.Module):
    config: LlamaConfig

    @nn.compact
    def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array, mask: jax.Array) -> jax.Array:
        cfg = self.config
        b, t, _ = x.shape
        hq, hkv, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        q = Linear(hq * d, use_bias=cfg.qkv_bias, name="q_proj")(x).reshape(b, t, hq, d)
        k = Linear(hkv * d, use_bias=cfg.qkv_bias, name="k_proj")(x).reshape(b, t, hkv, d)
        v = Linear(hkv * d, use_bias=cfg.qkv_bias, name="v_proj")(x).reshape(b, t, hkv, d)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        # Grouped-query attention: query heads [hkv, group] share one key/value head.
        q = q.reshape(b, t, hkv, hq // hkv, d)
        scores = jnp.einsum("bqhgd,bkhd->bhgqk", q, k).astype(jnp.float32) / jnp.sqrt(jnp.float32(d))
        scores = jnp.where(mask[:, None, None, :, :], scores, _MASK_VALUE)
        probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
        out = jnp.einsum("bhgqk,bkhd->bqhgd", probs, v).reshape(b, t, hq * d)
        return Linear(cfg.hidden_size, use_bias=cfg.o_proj_bias, name="o_proj")(out)


class MLP(nn.Module):
    config: LlamaConfig

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        cfg = self.config
        gate = Linear(cfg.intermediate_size, use_bias=cfg.mlp_bias, name="gate_proj")(x)
        up = Linear(cfg.intermediate_size, use_bias=cfg.mlp_bias, name="up_proj")(x)
        return Linear(cfg.hidden_size, use_bias=cfg.mlp_bias, name="down_proj")(jax.nn.silu(gate) * up)


class DecoderLayer(nn.Module):
    config: LlamaConfig

    @nn.compact
    def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array, mask: jax.Array) -> jax.Array:
        eps = self.config.rms_norm_eps
        x = x + Attention(self.config, name="self_attn")(RMSNorm(eps, name="input_layernorm")(x), cos, sin, mask)
        return x + MLP(self.config, name="mlp")(RMSNorm(eps, name="post_attention_layernorm")(x))


class LlamaModel(nn.Module):
    """Embeddings, decoder layers and the final norm: HF's ``model.*`` sub-tree."""

    config: LlamaConfig
    remat: bool = False

    @nn.compact
    def __call__(self, input_ids: jax.Array, attention_mask: jax.Array, position_ids: jax.Array) -> jax.Array:
        cfg = self.config
        embed = self.param("embed_tokens", nn.initializers.normal(0.02), (cfg.vocab_size, cfg.hidden_size), jnp.float32)
        x = jnp.take(embed, input_ids, axis=0)
        cos, sin = rope_cos_sin(position_ids, cfg.head_dim, cfg.rope_theta)
        t = input_ids.shape[1]
        causal = jnp.tril(jnp.ones((t, t), dtype=bool))
        mask = causal[None, :, :] & attention_mask.astype(bool)[:, None, :]
        layer_cls = nn.remat(DecoderLayer) if self.remat else DecoderLayer
        for i in range(cfg.num_hidden_layers):
            x = layer_cls(cfg, name=f"layers_{i}")(x, cos, sin, mask)
        return RMSNorm(cfg.rms_norm_eps, name="norm")(x)


class LlamaForCausalLM(nn.Module):
    """The trunk under HF's ``model.*`` names; returns final hidden states.

    An untied output projection lives beside it as ``params["lm_head"]["weight"]`` (written by
    the HF converter) and is read with :func:`lm_head_weight`, so callers apply the head only
    where they need logits.
    """

    config: LlamaConfig
    remat: bool = False

    def setup(self) -> None:
        self.model = LlamaModel(self.config, remat=self.remat)

    def __call__(self, input_ids: jax.Array, attention_mask: jax.Array, position_ids: jax.Array) -> jax.Array:
        return self.model(input_ids, attention_mask, position_ids)


def lm_head_weight(params: dict, config: LlamaConfig) -> jax.Array:
    """The ``[vocab, hidden]`` output projection (the embedding matrix when tied)."""
    if config.tie_word_embeddings:
        return params["model"]["embed_tokens"]
    return params["lm_head"]["weight"]
