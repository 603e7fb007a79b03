"""The decoder hyper-parameters Relay's JAX learner needs, read from an HF ``config.json``.

Supported families (``model_type``) and options:

* ``llama``: GQA (``num_key_value_heads``), explicit ``head_dim``, tied or untied embeddings,
  ``attention_bias`` (biases on q/k/v/o projections) and ``mlp_bias`` (biases on gate/up/down).
* ``qwen2``: the Llama block with biases on the q/k/v projections (none on o_proj or the MLP),
  GQA, tied (e.g. Qwen2.5-3B) or untied (e.g. Qwen2.5-7B) embeddings; every layer must use full
  attention (``use_sliding_window: false`` and ``layer_types`` all ``"full_attention"``).

Both: plain (``"default"``) RoPE with any ``rope_theta`` and ``hidden_act: silu``. Anything else
(another ``model_type``, RoPE scaling, sliding-window attention, another activation) raises
:class:`ModelConfigError` naming the key, its value and what is supported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUPPORTED_MODEL_TYPES = ("llama", "qwen2")


class ModelConfigError(ValueError):
    """An HF config Relay cannot run (unsupported architecture or option)."""


@dataclass(frozen=True)
class LlamaConfig:
    """Decoder-only Llama-family hyper-parameters (names follow HF's ``LlamaConfig``).

    The bias flags say which ``Linear`` layers carry a ``bias`` tensor: ``qkv_bias`` for q/k/v_proj,
    ``o_proj_bias`` for o_proj, ``mlp_bias`` for gate/up/down_proj. :meth:`from_hf_dict` derives them
    from the family (Qwen2: q/k/v only) or from Llama's ``attention_bias``/``mlp_bias`` keys.
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

    @classmethod
    def from_hf_dict(cls, cfg: dict[str, Any]) -> LlamaConfig:
        model_type = _model_type(cfg)
        _check_activation(cfg)
        if model_type == "qwen2":
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
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            model_type=model_type,
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
    """Which projections carry biases: fixed for Qwen2 (q/k/v), from the config keys for Llama."""
    if model_type == "qwen2":
        return {"qkv_bias": True, "o_proj_bias": False, "mlp_bias": False}
    attention_bias = bool(cfg.get("attention_bias", False))
    return {"qkv_bias": attention_bias, "o_proj_bias": attention_bias, "mlp_bias": bool(cfg.get("mlp_bias", False))}


def _check_activation(cfg: dict[str, Any]) -> None:
    act = cfg.get("hidden_act", "silu")
    if act != "silu":
        raise ModelConfigError(f"hidden_act={act!r} is not supported (supported: 'silu')")


def _check_full_attention(cfg: dict[str, Any]) -> None:
    """Qwen2 may window some layers' attention; Relay's attention is full causal only."""
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


def _rope_theta(cfg: dict[str, Any]) -> float:
    """Plain RoPE only; transformers 5 keeps theta under `rope_parameters`."""
    params = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type not in ("default", None):
        raise ModelConfigError(f"rope_type={rope_type!r} is not supported yet (only plain RoPE)")
    return float(params.get("rope_theta", cfg.get("rope_theta", 10000.0)))
