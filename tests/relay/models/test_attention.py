"""Attention implementations and the segment mask: packed rows attend within their own sequence only; in a
bfloat16 forward q and k reach attention in bfloat16."""

import jax.numpy as jnp
import numpy as np

from benchmarks.harness.synthetic import synthetic_batch
from relay.models.attention import attention, library_attention, segment_causal_mask, xla_attention
from relay.models.hf_params import load_hf_checkpoint
from relay.models.llama_config import LlamaConfig
from relay.models.llama_flax import LlamaForCausalLM
from relay.packing import layout_rows


def test_segment_causal_mask_golden() -> None:
    mask = np.asarray(segment_causal_mask(jnp.array([[1, 1, 2, 0]])))[0]
    np.testing.assert_array_equal(mask, [[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]])


def test_branch_mask_golden() -> None:
    """A shared prompt (branch 0) and two responses: each response sees the prompt and itself only."""
    mask = np.asarray(segment_causal_mask(jnp.array([[1, 1, 1, 1, 1]]), jnp.array([[0, 0, 1, 1, 2]])))[0]
    np.testing.assert_array_equal(
        mask, [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 0, 0, 1]]
    )


def test_attention_implementations_agree_on_real_rows() -> None:
    rng = np.random.default_rng(0)
    b, t, hq, hkv, d = 2, 12, 6, 2, 16
    q, k, v = (jnp.asarray(rng.normal(size=(b, t, h, d)), jnp.float32) for h in (hq, hkv, hkv))
    segments = jnp.array([[1] * 5 + [2] * 4 + [0] * 3, [1] * 12])
    mask = segment_causal_mask(segments)
    real = np.asarray(segments) > 0
    a, f = np.asarray(xla_attention(q, k, v, mask)), np.asarray(library_attention(q, k, v, mask, "xla"))
    np.testing.assert_allclose(a[real], f[real], atol=1e-5)
    # Segment 2 of row 0 computed alone equals its packed result: no attention across sequences.
    alone = np.asarray(xla_attention(q[:1, 5:9], k[:1, 5:9], v[:1, 5:9], segment_causal_mask(jnp.ones((1, 4), int))))
    np.testing.assert_allclose(a[0, 5:9], alone[0], atol=1e-6)


def test_model_hidden_states_equal_across_implementations(tiny_model_dir) -> None:
    """The flax model gives the same hidden states at every real token with either attention (fp32), on
    padded and on packed rows (packed == padded per token is tests/relay/learner/test_packing.py's)."""
    config = LlamaConfig.from_pretrained(tiny_model_dir)
    params = load_hf_checkpoint(tiny_model_dir, config)
    batch = synthetic_batch(6, 8, 8, vocab=config.vocab_size, seed=2)
    for packing in (False, True):
        rows, _ = layout_rows(batch, 8, packing=packing, width=48)
        real = rows["segment_ids"] > 0
        outs = [
            np.asarray(
                LlamaForCausalLM(config, attention=impl).apply(
                    {"params": params}, rows["input_ids"], rows["segment_ids"], rows["position_ids"]
                )
            )[real]
            for impl in ("xla", "dot_product_attention")
        ]
        np.testing.assert_allclose(outs[1], outs[0], atol=1e-5)


def test_bfloat16_inputs_give_bfloat16_outputs_on_every_cpu_implementation() -> None:
    """The inputs a bf16 step hands attention (q, k, v all bf16, as apply_rope now returns them) run on both
    implementations this CPU has, agree with each other, and with float32 within bf16's rounding."""
    rng = np.random.default_rng(1)
    q, k, v = (jnp.asarray(rng.normal(size=(2, 12, h, 16)), jnp.bfloat16) for h in (4, 2, 2))
    mask = segment_causal_mask(jnp.array([[1] * 7 + [2] * 5, [1] * 12]))
    exact = np.asarray(xla_attention(*(x.astype(jnp.float32) for x in (q, k, v)), mask))
    for impl in ("xla", "dot_product_attention"):
        out = attention(q, k, v, mask, impl)
        assert out.dtype == jnp.bfloat16
        np.testing.assert_allclose(np.asarray(out, np.float32), exact, atol=0.03)
