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
python -m relay.models.tiny --out /tmp/tiny-rm --classifier    # a one-label *ForSequenceClassification
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
    """HF config kwargs every family shares: sizes, token ids, float32 (the saved dtype is set by :func:`_save`)."""
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


def _save(model: Any, tokenizer: Any, out_dir: str | Path, dtype: str, max_shard_size: str | int | None) -> Path:
    """Cast ``model`` to ``dtype`` and save it with the tokenizer; with ``max_shard_size``, in shards of at most that
    size plus ``model.safetensors.index.json`` (a tensor larger than the limit gets a shard of its own)."""
    model = model.to(_torch_dtype(dtype))  # config.dtype follows, so config.json names the weights' dtype
    out = Path(out_dir)
    shard_args = {} if max_shard_size is None else {"max_shard_size": max_shard_size}
    model.save_pretrained(out, safe_serialization=True, **shard_args)
    tokenizer.save_pretrained(out)
    return out


def _tokenizer(tokenizer_dir: str | Path | None) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tokenizer_dir or ensure_model()))


# What every tiny model has unless told otherwise: 2 layers, hidden 64, head_dim 32 (the smallest vLLM's CPU attention
# supports) with 2 query heads over 1 key/value head, tied embeddings.
TINY_SIZES: dict[str, Any] = {
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "tie_word_embeddings": True,
}
# Llama 3.1's scaling (factor 8, low 1, high 4) over a 64-position pre-training context instead of 8192.
TINY_LLAMA3_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}
_QWEN_ROPE = {"rope_type": "default", "rope_theta": 1e6}
# family -> (transformers' config and model classes, the family's own settings over TINY_SIZES)
FAMILIES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama3": ("LlamaConfig", "LlamaForCausalLM", {"rope_parameters": TINY_LLAMA3_ROPE}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {"rope_parameters": _QWEN_ROPE, "use_sliding_window": False}),
    # head_dim 32 given explicitly, as Qwen3 does (4 heads x 32 != hidden 64)
    "qwen3": (
        "Qwen3Config",
        "Qwen3ForCausalLM",
        {
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 32,
            "rope_parameters": _QWEN_ROPE,
            "use_sliding_window": False,
            "attention_bias": False,
        },
    ),
}


def build_tiny(
    family: str,
    out_dir: str | Path,
    *,
    tokenizer_dir: str | Path | None = None,
    seed: int = 0,
    dtype: str = "float32",
    max_shard_size: str | int | None = None,
    **settings: Any,
) -> Path:
    """Save a random model of ``family`` (a key of :data:`FAMILIES`) plus the SmolLM2 tokenizer to ``out_dir``:
    :data:`TINY_SIZES`, then the family's settings, then ``settings`` (any of transformers' config keys:
    ``tie_word_embeddings``, ``attention_bias``, ``rope_parameters``, ...), the float32 weights drawn from ``seed``
    (biases and q/k norms at random too), saved as ``dtype`` in one ``model.safetensors`` or, with
    ``max_shard_size``, shards and an index."""
    import torch
    import transformers

    config_class, model_class, family_settings = FAMILIES[family]
    tokenizer = _tokenizer(tokenizer_dir)
    config = getattr(transformers, config_class)(
        **_common_config(tokenizer, **{**TINY_SIZES, **family_settings, **settings})
    )
    _torch_dtype(dtype)  # an unknown dtype is refused before the model is built
    torch.manual_seed(seed)
    model = getattr(transformers, model_class)(config)
    _randomise_biases(model, seed)
    return _save(model, tokenizer, out_dir, dtype, max_shard_size)


def build_tiny_llama(out_dir: str | Path, **options: Any) -> Path:
    """A tiny Llama (:func:`build_tiny`), optionally with ``attention_bias``/``mlp_bias``."""
    return build_tiny("llama", out_dir, **options)


def build_tiny_llama3(out_dir: str | Path, **options: Any) -> Path:
    """A tiny Llama with :data:`TINY_LLAMA3_ROPE` (Llama 3.1-3.3's RoPE; :func:`build_tiny`)."""
    return build_tiny("llama3", out_dir, **options)


def build_tiny_qwen2(out_dir: str | Path, **options: Any) -> Path:
    """A tiny Qwen2: q/k/v biases, ``rope_theta`` 1e6, full attention (:func:`build_tiny`)."""
    return build_tiny("qwen2", out_dir, **options)


def build_tiny_qwen3(out_dir: str | Path, **options: Any) -> Path:
    """A tiny dense Qwen3: per-head q/k norms, no biases, explicit head_dim 32, ``rope_theta`` 1e6
    (:func:`build_tiny`)."""
    return build_tiny("qwen3", out_dir, **options)


def build_tiny_classifier(family: str, out_dir: str | Path, *, num_labels: int = 1, seed: int = 0) -> Path:
    """A tiny random ``*ForSequenceClassification`` of ``family`` (:data:`FAMILIES`' sizes) with the SmolLM2
    tokenizer: the shape of a reward model (``num_labels=1``: one score per sequence), for the reward-model role's
    tests. Saved float32 in one ``model.safetensors``."""
    import torch
    import transformers

    config_class, model_class, family_settings = FAMILIES[family]
    tokenizer = _tokenizer(None)
    config = getattr(transformers, config_class)(
        **_common_config(tokenizer, **{**TINY_SIZES, **family_settings}), num_labels=num_labels
    )
    torch.manual_seed(seed)
    model = getattr(transformers, model_class.replace("ForCausalLM", "ForSequenceClassification"))(config)
    _randomise_biases(model, seed)
    return _save(model, tokenizer, out_dir, "float32", None)


def main() -> None:
    parser = argparse.ArgumentParser(description="write a tiny random Llama, Llama 3, Qwen2 or Qwen3 checkpoint")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--family", choices=sorted(FAMILIES), default="llama")
    parser.add_argument("--untied", action="store_true", help="separate lm_head weights")
    parser.add_argument(
        "--shards", action="store_true", help=f"several safetensors shards and an index (max {TINY_SHARD_SIZE} each)"
    )
    parser.add_argument("--dtype", choices=DTYPES, default="float32", help="the saved weights' dtype")
    parser.add_argument(
        "--classifier", action="store_true", help="a one-label sequence classifier instead (a reward model's shape)"
    )
    args = parser.parse_args()
    if args.classifier:
        print(build_tiny_classifier(args.family, args.out))
        return
    layout = {"dtype": args.dtype, "max_shard_size": TINY_SHARD_SIZE if args.shards else None}
    print(build_tiny(args.family, args.out, tie_word_embeddings=not args.untied, **layout))


if __name__ == "__main__":
    main()
