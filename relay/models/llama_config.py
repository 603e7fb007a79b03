"""The decoder hyper-parameters Relay's JAX learner needs, read from an HF ``config.json``.

Supported families (``model_type``) and options:

* ``llama``: GQA (``num_key_value_heads``), explicit ``head_dim``, tied or untied embeddings,
  ``attention_bias`` (biases on q/k/v/o projections) and ``mlp_bias`` (biases on gate/up/down).
* ``qwen2``: the Llama block with biases on the q/k/v projections (none on o_proj or the MLP),
  GQA, tied (e.g. Qwen2.5-3B) or untied (e.g. Qwen2.5-7B) embeddings.
* ``qwen3`` (dense): the Llama block with an RMSNorm over ``head_dim`` on every query and key head before RoPE
  (``self_attn.q_norm``/``k_norm``), q/k/v/o biases only with ``attention_bias`` (none in the released models),
  an explicit ``head_dim`` (128 in Qwen3-0.6B..32B, not ``hidden_size / heads``).

Qwen2 and Qwen3 must use full attention in every layer (``use_sliding_window: false`` and ``layer_types`` all
``"full_attention"``). Every family: ``hidden_act: silu`` and RoPE of ``rope_type`` ``"default"`` (any
``rope_theta``) or ``"llama3"`` (Llama 3.1-3.3's frequency scaling: :class:`Llama3RopeScaling`). Anything else
(another ``model_type``, another RoPE scaling, sliding-window attention, another activation) raises
:class:`ModelConfigError` naming the key, its value and what is supported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUPPORTED_MODEL_TYPES = ("llama", "qwen2", "qwen3")
SUPPORTED_ROPE_TYPES = ("default", "llama3")


class ModelConfigError(ValueError):
    """An HF config Relay cannot run (unsupported architecture or option)."""


@dataclass(frozen=True)
class Llama3RopeScaling:
    """Llama 3.1-3.3's RoPE frequency scaling (``rope_type: llama3``; HF names): wavelengths longer than
    ``original_max_position_embeddings / low_freq_factor`` are stretched by ``factor``, those shorter than
    ``original_max_position_embeddings / high_freq_factor`` kept, those between interpolated
    (:func:`relay.models.rope.inverse_frequencies` has the worked example). Llama 3.1-8B: factor 8, low 1, high 4,
    original 8192."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position_embeddings: int


@dataclass(frozen=True)
class LlamaConfig:
    """Decoder-only Llama-family hyper-parameters (names follow HF's ``LlamaConfig``).

    The bias flags say which ``Linear`` layers carry a ``bias`` tensor: ``qkv_bias`` for q/k/v_proj,
    ``o_proj_bias`` for o_proj, ``mlp_bias`` for gate/up/down_proj. :meth:`from_hf_dict` derives them
    from the family (Qwen2: q/k/v only) or from the ``attention_bias``/``mlp_bias`` keys (Llama; Qwen3 has
    ``attention_bias`` only). ``qk_norm``: Qwen3's per-head RMSNorm on queries and keys. ``rope_scaling``: None
    for plain RoPE.
    """

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    tie_word_embeddings: bool
    model_type: str = "llama"
    qkv_bias: bool = False
    o_proj_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    rope_scaling: Llama3RopeScaling | None = None

    @classmethod
    def from_hf_dict(cls, cfg: dict[str, Any]) -> LlamaConfig:
        model_type = _model_type(cfg)
        _check_activation(cfg)
        if model_type in ("qwen2", "qwen3"):
            _check_full_attention(cfg)
        heads = int(cfg["num_attention_heads"])
        return cls(
            vocab_size=int(cfg["vocab_size"]),
            hidden_size=int(cfg["hidden_size"]),
            intermediate_size=int(cfg["intermediate_size"]),
            num_hidden_layers=int(cfg["num_hidden_layers"]),
            num_attention_heads=heads,
            num_key_value_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(cfg.get("head_dim") or int(cfg["hidden_size"]) // heads),
            rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
            rope_theta=_rope_theta(cfg),
            rope_scaling=_rope_scaling(cfg),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            model_type=model_type,
            qk_norm=model_type == "qwen3",
            **_bias_flags(cfg, model_type),
        )

    @classmethod
    def from_pretrained(cls, model_dir: str | Path) -> LlamaConfig:
        path = Path(model_dir) / "config.json"
        if not path.is_file():
            raise ModelConfigError(f"{path} not found: model.path must be an HF checkpoint directory")
        return cls.from_hf_dict(json.loads(path.read_text()))


def _model_type(cfg: dict[str, Any]) -> str:
    model_type = cfg.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ModelConfigError(
            f"model_type={model_type!r} is not supported by Relay's JAX learner "
            f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})"
        )
    return model_type


def _bias_flags(cfg: dict[str, Any], model_type: str) -> dict[str, bool]:
    """Which projections carry biases: fixed for Qwen2 (q/k/v), from ``attention_bias`` for Qwen3 (its MLP has
    none), from ``attention_bias``/``mlp_bias`` for Llama."""
    if model_type == "qwen2":
        return {"qkv_bias": True, "o_proj_bias": False, "mlp_bias": False}
    attention_bias = bool(cfg.get("attention_bias", False))
    mlp_bias = model_type == "llama" and bool(cfg.get("mlp_bias", False))
    return {"qkv_bias": attention_bias, "o_proj_bias": attention_bias, "mlp_bias": mlp_bias}


def _check_activation(cfg: dict[str, Any]) -> None:
    act = cfg.get("hidden_act", "silu")
    if act != "silu":
        raise ModelConfigError(f"hidden_act={act!r} is not supported (supported: 'silu')")


def _check_full_attention(cfg: dict[str, Any]) -> None:
    """Qwen2 and Qwen3 may window some layers' attention; Relay's attention is full causal only."""
    if cfg.get("use_sliding_window", False):
        raise ModelConfigError(
            f"use_sliding_window={cfg['use_sliding_window']!r} is not supported "
            "(supported: use_sliding_window=false, full causal attention in every layer)"
        )
    other = sorted({t for t in cfg.get("layer_types") or [] if t != "full_attention"})
    if other:
        raise ModelConfigError(
            f"layer_types containing {other} is not supported (supported: every layer 'full_attention')"
        )


def _rope_parameters(cfg: dict[str, Any]) -> dict[str, Any]:
    """The RoPE settings: transformers 5 writes them as ``rope_parameters`` (theta included), older
    checkpoints as ``rope_scaling`` beside a top-level ``rope_theta``."""
    return cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}


def _rope_type(cfg: dict[str, Any]) -> str:
    params = _rope_parameters(cfg)
    rope_type = params.get("rope_type", params.get("type")) or "default"
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise ModelConfigError(
            f"rope_type={rope_type!r} is not supported (supported: {', '.join(SUPPORTED_ROPE_TYPES)})"
        )
    factor = params.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0))
    if factor != 1.0:
        raise ModelConfigError(f"partial_rotary_factor={factor!r} is not supported (supported: 1.0, every dimension)")
    return rope_type


def _rope_theta(cfg: dict[str, Any]) -> float:
    _rope_type(cfg)
    return float(_rope_parameters(cfg).get("rope_theta", cfg.get("rope_theta", 10000.0)))


def _rope_scaling(cfg: dict[str, Any]) -> Llama3RopeScaling | None:
    """Llama 3's scaling from its four keys (each required: a missing one is named), None for plain RoPE."""
    if _rope_type(cfg) == "default":
        return None
    params = _rope_parameters(cfg)
    keys = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
    missing = [k for k in keys if k not in params]
    if missing:
        raise ModelConfigError(f"rope_type='llama3' needs {', '.join(missing)} in rope_parameters (rope_scaling)")
    low, high = float(params["low_freq_factor"]), float(params["high_freq_factor"])
    if high <= low:
        raise ModelConfigError(f"high_freq_factor={high!r} must exceed low_freq_factor={low!r} (rope_type='llama3')")
    return Llama3RopeScaling(
        factor=float(params["factor"]),
        low_freq_factor=low,
        high_freq_factor=high,
        original_max_position_embeddings=int(params["original_max_position_embeddings"]),
    )
