"""Llama (plain and Llama 3 RoPE), Qwen2 and Qwen3 (tied/untied, GQA, biases, q/k norms): the HF round trip is a
bit-exact rename and the flax logits match transformers' forward on a left-padded batch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from transformers import AutoModelForCausalLM

from relay.models.hf_params import hf_to_params, load_hf_checkpoint, params_to_hf
from relay.models.layer_stack import stack_layers
from relay.models.llama_config import LlamaConfig, ModelConfigError
from relay.models.llama_flax import LlamaForCausalLM, lm_head_weight
from relay.models.tiny import build_tiny_llama, build_tiny_llama3, build_tiny_qwen2, build_tiny_qwen3

LOGITS_ATOL = 1e-5  # float32, max |flax - torch| over every real (unpadded) position and vocab entry

# 4 query heads over 2 key/value heads: with a single kv head a wrong head grouping would go unnoticed.
_GQA = {"hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2}
VARIANTS: dict[str, tuple[Callable[..., Path], dict[str, Any]]] = {
    "llama-tied": (build_tiny_llama, {"tie_word_embeddings": True, "seed": 0}),
    "llama-untied": (build_tiny_llama, {"tie_word_embeddings": False, "seed": 1}),
    "llama-attention-bias": (build_tiny_llama, {"tie_word_embeddings": True, "attention_bias": True, "seed": 2}),
    "llama-all-biases": (
        build_tiny_llama,
        {"tie_word_embeddings": False, "attention_bias": True, "mlp_bias": True, "seed": 3},
    ),
    "qwen2-tied": (build_tiny_qwen2, {"tie_word_embeddings": True, "seed": 4}),
    "qwen2-untied": (build_tiny_qwen2, {"tie_word_embeddings": False, "seed": 5}),
    "llama3-rope": (build_tiny_llama3, {"tie_word_embeddings": True, "seed": 6}),
    # 8 query heads of head_dim 32 over hidden 128: Qwen3's explicit head_dim differs from hidden / heads
    "qwen3-tied": (build_tiny_qwen3, {"tie_word_embeddings": True, "num_attention_heads": 8, "seed": 7}),
    "qwen3-untied": (build_tiny_qwen3, {"tie_word_embeddings": False, "seed": 8}),
}
# projection -> which config flag gives it a bias
_BIAS_FLAG = {
    "q_proj": "qkv_bias",
    "k_proj": "qkv_bias",
    "v_proj": "qkv_bias",
    "o_proj": "o_proj_bias",
    "gate_proj": "mlp_bias",
    "up_proj": "mlp_bias",
    "down_proj": "mlp_bias",
}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``checkpoint(variant)``: the tiny checkpoint directory, built once per module."""
    built: dict[str, Path] = {}

    def get(variant: str) -> Path:
        if variant not in built:
            builder, kwargs = VARIANTS[variant]
            built[variant] = builder(tmp_path_factory.mktemp(variant), **{**_GQA, **kwargs})
        return built[variant]

    return get


def _left_padded_batch(vocab: int, pad: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Four rows of 16 tokens, three of them left-padded by different amounts."""
    rng = np.random.default_rng(0)
    ids = rng.integers(3, vocab, (4, 16))
    mask = np.ones_like(ids)
    for row, n_pad in enumerate((0, 1, 5, 11)):
        mask[row, :n_pad] = 0
    ids[mask == 0] = pad
    pos = np.clip(np.cumsum(mask, axis=1) - 1, 0, None)
    return ids, mask, pos


def _flax_logits(model_dir: Path, ids: np.ndarray, mask: np.ndarray, pos: np.ndarray, remat: bool = False):
    cfg = LlamaConfig.from_pretrained(model_dir)
    params = load_hf_checkpoint(model_dir, cfg)
    model = LlamaForCausalLM(cfg, remat=remat, scan_layers=remat)
    if remat:  # the scanned model reads the layers stacked
        params = stack_layers(params, cfg.num_hidden_layers)

    @jax.jit
    def logits(p: dict, i: jax.Array, m: jax.Array, q: jax.Array) -> jax.Array:
        hidden = model.apply({"params": p}, i, m, q)
        return jnp.einsum("bth,vh->btv", hidden, lm_head_weight(p, cfg))

    return np.asarray(logits(params, ids, mask, pos))


def _torch_logits(model_dir: Path, ids: np.ndarray, mask: np.ndarray, pos: np.ndarray) -> np.ndarray:
    hf = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        out = hf(
            input_ids=torch.from_numpy(ids),
            attention_mask=torch.from_numpy(mask),
            position_ids=torch.from_numpy(pos),
            use_cache=False,
        )
    return out.logits.numpy()


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_round_trip_is_bit_exact(variant: str, checkpoint: Callable[[str], Path]) -> None:
    model_dir = checkpoint(variant)
    cfg = LlamaConfig.from_pretrained(model_dir)
    state = load_file(str(model_dir / "model.safetensors"))
    back = params_to_hf(load_hf_checkpoint(model_dir, cfg))
    expected = {k for k in state if not (k == "lm_head.weight" and cfg.tie_word_embeddings)}
    assert set(back) == expected
    assert ("lm_head.weight" in back) == (not cfg.tie_word_embeddings)
    for name in expected:
        assert back[name].dtype == state[name].dtype, name
        np.testing.assert_array_equal(back[name], state[name], err_msg=name)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_biases_and_qk_norms_follow_the_config(variant: str, checkpoint: Callable[[str], Path]) -> None:
    """Exactly the projections the family gives a bias have one, non-zero, under its HF name; Qwen3's q/k norm
    weights likewise, drawn away from ones (so a swap would show)."""
    model_dir = checkpoint(variant)
    cfg = LlamaConfig.from_pretrained(model_dir)
    back = params_to_hf(load_hf_checkpoint(model_dir, cfg))
    for layer in range(cfg.num_hidden_layers):
        for proj, flag in _BIAS_FLAG.items():
            block = "mlp" if flag == "mlp_bias" else "self_attn"
            name = f"model.layers.{layer}.{block}.{proj}.bias"
            assert (name in back) == getattr(cfg, flag), name
            if name in back:
                assert np.abs(back[name]).max() > 0.05, f"{name} is ~zero: the test would not see a dropped bias"
        for norm in ("q_norm", "k_norm"):
            name = f"model.layers.{layer}.self_attn.{norm}.weight"
            assert (name in back) == cfg.qk_norm, name
            if name in back:
                assert back[name].shape == (cfg.head_dim,) and np.abs(back[name] - 1).max() > 0.05, name


def test_qwen2_config_is_read() -> None:
    cfg = LlamaConfig.from_hf_dict({**_QWEN2, "tie_word_embeddings": True})
    assert (cfg.model_type, cfg.rope_theta, cfg.tie_word_embeddings) == ("qwen2", 1e6, True)
    assert (cfg.qkv_bias, cfg.o_proj_bias, cfg.mlp_bias) == (True, False, False)
    assert (cfg.num_key_value_heads, cfg.head_dim) == (2, 32)
    llama = LlamaConfig.from_hf_dict({**_QWEN2, "model_type": "llama", "attention_bias": True, "mlp_bias": True})
    assert (llama.qkv_bias, llama.o_proj_bias, llama.mlp_bias) == (True, True, True)
    plain = LlamaConfig.from_hf_dict({**_QWEN2, "model_type": "llama"})
    assert (plain.qkv_bias, plain.o_proj_bias, plain.mlp_bias) == (False, False, False)


# The published config.json keys that matter here: Llama-3.1-8B-Instruct (transformers 4 layout: rope_scaling beside
# rope_theta) and Qwen3-8B.
_LLAMA31_8B = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "tie_word_embeddings": False,
}
_QWEN3_8B = {
    "model_type": "qwen3",
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "rope_theta": 1000000,
    "attention_bias": False,
    "use_sliding_window": False,
    "sliding_window": None,
    "max_window_layers": 36,
    "tie_word_embeddings": False,
}


def test_llama31_and_qwen3_configs_are_read() -> None:
    llama = LlamaConfig.from_hf_dict(_LLAMA31_8B)
    assert (llama.rope_theta, llama.head_dim, llama.qk_norm) == (500000.0, 128, False)
    assert llama.rope_scaling is not None and llama.rope_scaling.factor == 8.0
    assert llama.rope_scaling.original_max_position_embeddings == 8192
    qwen3 = LlamaConfig.from_hf_dict(_QWEN3_8B)
    assert (qwen3.model_type, qwen3.qk_norm, qwen3.head_dim, qwen3.rope_scaling) == ("qwen3", True, 128, None)
    assert (qwen3.qkv_bias, qwen3.o_proj_bias, qwen3.mlp_bias) == (False, False, False)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_logits_match_transformers_with_left_padding(variant: str, checkpoint: Callable[[str], Path]) -> None:
    model_dir = checkpoint(variant)
    cfg = LlamaConfig.from_pretrained(model_dir)
    ids, mask, pos = _left_padded_batch(cfg.vocab_size)
    got = _flax_logits(model_dir, ids, mask, pos)
    want = _torch_logits(model_dir, ids, mask, pos)
    assert got.shape == want.shape == (4, 16, cfg.vocab_size)
    assert np.all(np.isfinite(got))
    real = mask.astype(bool)
    diff = np.abs(got - want)[real].max()
    print(f"{variant}: max |flax - torch| logits = {diff:.3g} (max |logit| {np.abs(want[real]).max():.3g})")
    assert diff < LOGITS_ATOL
    assert np.abs(want[real]).max() > 100 * LOGITS_ATOL  # the tolerance is small against the logits


def test_remat_gives_the_same_logits(checkpoint: Callable[[str], Path]) -> None:
    model_dir = checkpoint("qwen2-untied")
    ids, mask, pos = _left_padded_batch(LlamaConfig.from_pretrained(model_dir).vocab_size)
    plain = _flax_logits(model_dir, ids, mask, pos)
    remat = _flax_logits(model_dir, ids, mask, pos, remat=True)
    np.testing.assert_allclose(remat, plain, atol=1e-6)


def test_checkpoint_not_matching_the_config_is_refused(checkpoint: Callable[[str], Path]) -> None:
    """Qwen2 tensors read under a bias-free Llama config: the biases are named, not silently dropped."""
    model_dir = checkpoint("qwen2-untied")
    cfg = LlamaConfig.from_pretrained(model_dir)
    as_llama = LlamaConfig(**{**cfg.__dict__, "model_type": "llama", "qkv_bias": False})
    state = load_file(str(model_dir / "model.safetensors"))
    with pytest.raises(ValueError, match=r"model_type='llama'.*unexpected model\.layers\.0\.self_attn\.k_proj\.bias"):
        hf_to_params(state, as_llama)
    no_bias = {k: v for k, v in state.items() if k != "model.layers.1.self_attn.v_proj.bias"}
    with pytest.raises(ValueError, match=r"missing model\.layers\.1\.self_attn\.v_proj\.bias"):
        hf_to_params(no_bias, cfg)


_QWEN2 = {
    "model_type": "qwen2",
    "vocab_size": 64,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "rope_theta": 1000000.0,
    "use_sliding_window": False,
    "sliding_window": 32768,
    "max_window_layers": 28,
}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"use_sliding_window": True}, r"use_sliding_window=True is not supported \(supported: use_sliding_window=fa"),
        ({"layer_types": ["full_attention", "sliding_attention"]}, r"layer_types .*'sliding_attention'.*supported"),
        ({"model_type": "mistral"}, r"model_type='mistral' is not supported .*supported: llama, qwen2"),
        ({"model_type": "qwen3_moe"}, r"model_type='qwen3_moe' is not supported .*supported: llama, qwen2, qwen3"),
        ({"model_type": "qwen3", "use_sliding_window": True}, r"use_sliding_window=True is not supported"),
        ({"rope_parameters": {"rope_type": "llama3", "factor": 8.0}}, r"rope_type='llama3' needs low_freq_factor, hi"),
        ({"partial_rotary_factor": 0.5}, r"partial_rotary_factor=0.5 is not supported"),
        ({"hidden_act": "gelu"}, r"hidden_act='gelu' is not supported \(supported: 'silu'\)"),
        (
            {"rope_scaling": {"type": "yarn", "factor": 4.0}},
            r"rope_type='yarn' is not supported \(supported: default, llama3\)",
        ),
    ],
)
def test_unsupported_options_are_named(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ModelConfigError, match=message):
        LlamaConfig.from_hf_dict({**_QWEN2, **overrides})
