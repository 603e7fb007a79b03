"""Rotary position embeddings as HF's Llama-family models compute them: the inverse frequencies (plain, or with
Llama 3's frequency scaling), the cos/sin tables for given positions, and the rotation of q and k."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from relay.models.llama_config import Llama3RopeScaling, LlamaConfig


def inverse_frequencies(head_dim: int, theta: float, scaling: Llama3RopeScaling | None = None) -> jax.Array:
    """The ``head_dim / 2`` rotation frequencies, float32: ``theta ** (-2i / head_dim)``, then with ``scaling``
    (``rope_type: llama3``) each frequency by its wavelength ``2 pi / f`` against the pre-training context ``C =
    original_max_position_embeddings``: longer than ``C / low_freq_factor``: ``f / factor``; shorter than
    ``C / high_freq_factor``: ``f``; between: ``(1 - s) f / factor + s f`` with ``s = (C / wavelength -
    low_freq_factor) / (high_freq_factor - low_freq_factor)``.

    Worked example: head_dim 8, theta 10000 -> ``[1, 0.1, 0.01, 0.001]`` (wavelengths 6.3, 63, 628, 6283). With
    factor 8, low 1, high 4, C 1024 (thresholds 1024 and 256): 1 and 0.1 are kept, 0.001 becomes 0.000125, and 0.01
    (628, between) has ``s = (1024 / 628.3 - 1) / 3 = 0.2099`` -> ``0.7901 * 0.01 / 8 + 0.2099 * 0.01 =
    0.003087``.
    """
    f = 1.0 / (theta ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim))
    if scaling is None:
        return f
    context = scaling.original_max_position_embeddings
    wavelength = 2 * math.pi / f
    stretched = jnp.where(wavelength > context / scaling.low_freq_factor, f / scaling.factor, f)
    s = (context / wavelength - scaling.low_freq_factor) / (scaling.high_freq_factor - scaling.low_freq_factor)
    smoothed = (1 - s) * stretched / scaling.factor + s * stretched
    between = (wavelength >= context / scaling.high_freq_factor) & (wavelength <= context / scaling.low_freq_factor)
    return jnp.where(between, smoothed, stretched)


def rope_cos_sin(position_ids: jax.Array, config: LlamaConfig) -> tuple[jax.Array, jax.Array]:
    """HF's RoPE tables for ``position_ids`` [B, T] -> cos, sin of shape [B, T, head_dim]."""
    inv_freq = inverse_frequencies(config.head_dim, config.rope_theta, config.rope_scaling)
    freqs = position_ids.astype(jnp.float32)[..., None] * inv_freq
    emb = jnp.concatenate([freqs, freqs], axis=-1)
    return jnp.cos(emb), jnp.sin(emb)


def apply_rope(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotate ``x`` [B, T, H, D] by the half-split convention HF Llama uses. The rotation multiplies by the float32
    tables and the result is cast back to ``x``'s dtype, so in a bfloat16 step q and k meet v (and each other) in
    bfloat16, as every attention implementation expects (cuDNN's takes no mixed dtypes)."""
    half = x.shape[-1] // 2
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return (x * cos[:, :, None, :] + rotated * sin[:, :, None, :]).astype(x.dtype)
