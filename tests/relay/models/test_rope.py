"""RoPE: the inverse frequencies (plain and Llama 3's scaling) against the worked example and transformers' own
tables, and the rotation's dtype."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from relay.models.llama_config import Llama3RopeScaling, LlamaConfig
from relay.models.rope import apply_rope, inverse_frequencies, rope_cos_sin

LLAMA31 = Llama3RopeScaling(
    factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=8192
)


def _config(head_dim: int, theta: float, scaling: Llama3RopeScaling | None = None) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=8,
        hidden_size=2 * head_dim,
        intermediate_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=head_dim,
        rms_norm_eps=1e-5,
        rope_theta=theta,
        tie_word_embeddings=True,
        rope_scaling=scaling,
    )


def test_the_worked_example() -> None:
    plain = np.asarray(inverse_frequencies(8, 10000.0))
    np.testing.assert_allclose(plain, [1.0, 0.1, 0.01, 0.001], rtol=1e-6)
    scaling = Llama3RopeScaling(
        factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=1024
    )
    scaled = np.asarray(inverse_frequencies(8, 10000.0, scaling))
    np.testing.assert_allclose(scaled, [1.0, 0.1, 0.003087, 0.000125], rtol=1e-3)


@pytest.mark.parametrize(
    ("head_dim", "theta", "scaling"),
    [(64, 10000.0, None), (128, 500000.0, LLAMA31), (64, 500000.0, LLAMA31), (32, 500000.0, LLAMA31)],
    ids=["plain", "llama3.1-8b", "llama3.2-1b-head64", "tiny-head32"],
)
def test_inverse_frequencies_equal_transformers(head_dim: int, theta: float, scaling: Llama3RopeScaling | None) -> None:
    """transformers' ``ROPE_INIT_FUNCTIONS`` (the tables its Llama computes) for the same config, float32."""
    from transformers import LlamaConfig as HFLlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    rope = {"rope_type": "default", "rope_theta": theta}
    if scaling is not None:
        rope = {**rope, "rope_type": "llama3", **scaling.__dict__}
    hf = HFLlamaConfig(hidden_size=2 * head_dim, num_attention_heads=2, head_dim=head_dim, rope_parameters=rope)
    if scaling is None:
        want = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    else:
        want = ROPE_INIT_FUNCTIONS["llama3"](hf, "cpu")[0].numpy()
    got = np.asarray(inverse_frequencies(head_dim, theta, scaling))
    np.testing.assert_allclose(got, want, rtol=2e-6)
    if scaling is not None:  # the scaling changed something, or the comparison shows nothing
        assert not np.allclose(got, np.asarray(inverse_frequencies(head_dim, theta)), rtol=1e-3)


def test_cos_sin_follow_the_configs_scaling() -> None:
    positions = jnp.arange(6)[None]
    cos, sin = rope_cos_sin(positions, _config(32, 500000.0, LLAMA31))
    inv = np.asarray(inverse_frequencies(32, 500000.0, LLAMA31))
    angles = np.arange(6)[:, None] * np.concatenate([inv, inv])
    np.testing.assert_allclose(np.asarray(cos[0]), np.cos(angles), atol=1e-6)
    np.testing.assert_allclose(np.asarray(sin[0]), np.sin(angles), atol=1e-6)


def test_rope_keeps_the_input_dtype() -> None:
    """RoPE multiplies by float32 tables; its output is cast back, so q and k stay bf16 in a bf16 step (a float32 q
    against a bf16 v is what jax.nn.dot_product_attention refuses)."""
    cos, sin = rope_cos_sin(jnp.arange(6)[None], _config(16, 10000.0))
    x = jnp.ones((1, 6, 2, 16), jnp.bfloat16)
    assert apply_rope(x, cos, sin).dtype == jnp.bfloat16
    assert apply_rope(x.astype(jnp.float32), cos, sin).dtype == jnp.float32
