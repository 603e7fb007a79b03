"""Tiny random-initialised checkpoints with the real SmolLM2 tokenizer, for tests and smoke runs.

The families :class:`~relay.models.llama_config.LlamaConfig` supports:

* :func:`build_tiny_llama`: a Llama, optionally with ``attention_bias``/``mlp_bias``;
* :func:`build_tiny_llama3`: a Llama with Llama 3.1's RoPE scaling (``rope_type: llama3``, theta 5e5), its
  pre-training context shortened to 64 positions so that a 16-token test batch already meets scaled frequencies;
* :func:`build_tiny_qwen2`: a Qwen2 (q/k/v biases, ``rope_theta`` 1e6, full attention);
* :func:`build_tiny_qwen3`: a Qwen3 (per-head q/k RMSNorm, no biases, explicit ``head_dim``, ``rope_theta`` 1e6).

All default to head_dim 32 (the smallest vLLM's CPU attention supports) with GQA, float32 weights in one
``model.safetensors``, and every bias drawn at random (transformers initialises biases to zero, which would hide
bias bugs), as are Qwen3's q/k norm weights (initialised to ones, which would hide a swapped or dropped norm).

The real presets' models (Qwen2.5-3B/7B-Instruct) ship in another on-disk layout: bfloat16 weights in several
safetensors shards named by ``model.safetensors.index.json``. ``dtype="bfloat16"`` and ``max_shard_size``
(:data:`TINY_SHARD_SIZE` splits a tiny model: the embedding in one shard, the decoder layers in another) write a tiny
checkpoint in that layout, so every loader is tested on it. The weights are the same random draw whatever the layout
(the float32 model is built, then cast to ``dtype`` when saved).

python -m relay.models.tiny --out /tmp/tiny-llama [--family llama3|qwen2|qwen3] [--untied] [--shards] [--dtype bfloat16]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from relay.models.prepare_smollm2 import ensure_model

_BIAS_STD = 0.1  # larger than the weights' 0.02, so a dropped or misplaced bias shows in the logits
# Below the tiny embedding's size (49152 x 64 x 2 bytes in bfloat16, 6 MiB), above all decoder layers together:
# save_pretrained then writes at least two shards, like the real checkpoints.
TINY_SHARD_SIZE = "1MB"
DTYPES = ("float32", "bfloat16")


def _common_config(tokenizer: Any, **sizes: Any) -> dict[str, Any]:
    """HF config kwargs shared by both families: sizes, token ids, float32 (the saved dtype is set by :func:`_save`)."""
    return {
        "vocab_size": len(tokenizer),
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-5,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "dtype": "float32",
        **sizes,
    }


def _randomise_biases(model: Any, seed: int) -> None:
    """Draw every ``*.bias`` from N(0, _BIAS_STD^2) (transformers zero-initialises them) and every q/k norm weight
    from N(1, _BIAS_STD^2) (initialised to ones)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * _BIAS_STD)
            elif name.endswith(("q_norm.weight", "k_norm.weight")):
                p.copy_(1 + torch.randn(p.shape, generator=gen, dtype=p.dtype) * _BIAS_STD)


def _torch_dtype(dtype: str) -> Any:
    import torch

    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r}: the tiny builders write one of {DTYPES}")
    return getattr(torch, dtype)


def _save(
    model_cls: Any,
    config: Any,
    tokenizer: Any,
    out_dir: str | Path,
    seed: int,
    *,
    dtype: str = "float32",
    max_shard_size: str | int | None = None,
) -> Path:
    """Build the float32 model from ``seed``, cast it to ``dtype`` and save it with the tokenizer; with
    ``max_shard_size``, in shards of at most that size plus ``model.safetensors.index.json`` (a tensor larger than
    the limit gets a shard of its own)."""
    import torch

    weight_dtype = _torch_dtype(dtype)
    torch.manual_seed(seed)
    model = model_cls(config)
    _randomise_biases(model, seed)
    model = model.to(weight_dtype)  # config.dtype follows, so config.json names the weights' dtype
    out = Path(out_dir)
    shard_args = {} if max_shard_size is None else {"max_shard_size": max_shard_size}
    model.save_pretrained(out, safe_serialization=True, **shard_args)
    tokenizer.save_pretrained(out)
    return out


def _tokenizer(tokenizer_dir: str | Path | None) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tokenizer_dir or ensure_model()))


def build_tiny_llama(
    out_dir: str | Path,
    *,
    tokenizer_dir: str | Path | None = None,
    num_hidden_layers: int = 2,
    hidden_size: int = 64,
    intermediate_size: int = 128,
    num_attention_heads: int = 2,  # head_dim 32: the smallest vLLM's CPU attention supports
    num_key_value_heads: int = 1,
    tie_word_embeddings: bool = True,
    attention_bias: bool = False,
    mlp_bias: bool = False,
    rope_parameters: dict[str, Any] | None = None,
    seed: int = 0,
    dtype: str = "float32",
    max_shard_size: str | int | None = None,
) -> Path:
    """Save a random ``LlamaForCausalLM`` plus the SmolLM2 tokenizer to ``out_dir``: ``dtype`` weights, one
    ``model.safetensors`` or, with ``max_shard_size``, shards and an index. ``rope_parameters``: transformers'
    RoPE settings (None: plain RoPE, theta 1e4)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = _tokenizer(tokenizer_dir)
    config = LlamaConfig(
        **_common_config(
            tokenizer,
            hidden_size=hidden_size,
            intermediate_size=intermediate_size,
            num_hidden_layers=num_hidden_layers,
            num_attention_heads=num_attention_heads,
            num_key_value_heads=num_key_value_heads,
            tie_word_embeddings=tie_word_embeddings,
            attention_bias=attention_bias,
            mlp_bias=mlp_bias,
            **({} if rope_parameters is None else {"rope_parameters": rope_parameters}),
        )
    )
    return _save(LlamaForCausalLM, config, tokenizer, out_dir, seed, dtype=dtype, max_shard_size=max_shard_size)


def build_tiny_qwen2(
    out_dir: str | Path,
    *,
    tokenizer_dir: str | Path | None = None,
    num_hidden_layers: int = 2,
    hidden_size: int = 64,
    intermediate_size: int = 128,
    num_attention_heads: int = 2,  # head_dim 32: the smallest vLLM's CPU attention supports
    num_key_value_heads: int = 1,
    tie_word_embeddings: bool = True,
    rope_theta: float = 1e6,
    seed: int = 0,
    dtype: str = "float32",
    max_shard_size: str | int | None = None,
) -> Path:
    """Save a random ``Qwen2ForCausalLM`` (random q/k/v biases) plus the SmolLM2 tokenizer: ``dtype`` weights, one
    ``model.safetensors`` or, with ``max_shard_size``, shards and an index."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = _tokenizer(tokenizer_dir)
    config = Qwen2Config(
        **_common_config(
            tokenizer,
            hidden_size=hidden_size,
            intermediate_size=intermediate_size,
            num_hidden_layers=num_hidden_layers,
            num_attention_heads=num_attention_heads,
            num_key_value_heads=num_key_value_heads,
            tie_word_embeddings=tie_word_embeddings,
            rope_parameters={"rope_type": "default", "rope_theta": rope_theta},
            use_sliding_window=False,
        )
    )
    return _save(Qwen2ForCausalLM, config, tokenizer, out_dir, seed, dtype=dtype, max_shard_size=max_shard_size)


# Llama 3.1's scaling (factor 8, low 1, high 4) over a 64-position pre-training context instead of 8192.
TINY_LLAMA3_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}


def build_tiny_llama3(out_dir: str | Path, **kwargs: Any) -> Path:
    """:func:`build_tiny_llama` with :data:`TINY_LLAMA3_ROPE` (Llama 3.1-3.3's RoPE)."""
    return build_tiny_llama(out_dir, rope_parameters=TINY_LLAMA3_ROPE, **kwargs)


def build_tiny_qwen3(
    out_dir: str | Path,
    *,
    tokenizer_dir: str | Path | None = None,
    num_hidden_layers: int = 2,
    hidden_size: int = 64,
    intermediate_size: int = 128,
    num_attention_heads: int = 4,  # head_dim 32 given explicitly, as Qwen3 does (4 x 32 != hidden 64)
    num_key_value_heads: int = 2,
    tie_word_embeddings: bool = True,
    seed: int = 0,
    dtype: str = "float32",
    max_shard_size: str | int | None = None,
) -> Path:
    """Save a random dense ``Qwen3ForCausalLM`` (q/k norms drawn at random, no biases) plus the SmolLM2 tokenizer:
    ``dtype`` weights, one ``model.safetensors`` or, with ``max_shard_size``, shards and an index."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = _tokenizer(tokenizer_dir)
    config = Qwen3Config(
        **_common_config(
            tokenizer,
            hidden_size=hidden_size,
            intermediate_size=intermediate_size,
            num_hidden_layers=num_hidden_layers,
            num_attention_heads=num_attention_heads,
            num_key_value_heads=num_key_value_heads,
            head_dim=32,
            tie_word_embeddings=tie_word_embeddings,
            rope_parameters={"rope_type": "default", "rope_theta": 1e6},
            use_sliding_window=False,
            attention_bias=False,
        )
    )
    return _save(Qwen3ForCausalLM, config, tokenizer, out_dir, seed, dtype=dtype, max_shard_size=max_shard_size)


BUILDERS = {
    "llama": build_tiny_llama,
    "llama3": build_tiny_llama3,
    "qwen2": build_tiny_qwen2,
    "qwen3": build_tiny_qwen3,
}


def main() -> None:
    parser = argparse.ArgumentParser(description="write a tiny random Llama, Llama 3, Qwen2 or Qwen3 checkpoint")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--family", choices=sorted(BUILDERS), default="llama")
    parser.add_argument("--untied", action="store_true", help="separate lm_head weights")
    parser.add_argument(
        "--shards", action="store_true", help=f"several safetensors shards and an index (max {TINY_SHARD_SIZE} each)"
    )
    parser.add_argument("--dtype", choices=DTYPES, default="float32", help="the saved weights' dtype")
    args = parser.parse_args()
    layout = {"dtype": args.dtype, "max_shard_size": TINY_SHARD_SIZE if args.shards else None}
    print(BUILDERS[args.family](args.out, tie_word_embeddings=not args.untied, **layout))


if __name__ == "__main__":
    main()
