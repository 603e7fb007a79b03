"""The Llama-family hyper-parameters Relay's models need, read from an HF `config.json`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUPPORTED_MODEL_TYPES = ("llama",)


class ModelConfigError(ValueError):
    """An HF config Relay cannot run (unsupported architecture or option)."""


@dataclass(frozen=True)
class LlamaConfig:
    """Decoder-only Llama hyper-parameters (names follow HF's `LlamaConfig`)."""

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

    @classmethod
    def from_hf_dict(cls, cfg: dict[str, Any]) -> LlamaConfig:
        model_type = cfg.get("model_type")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ModelConfigError(
                f"model_type={model_type!r} is not supported by Relay's JAX learner "
                f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})"
            )
        rope_theta = _rope_theta(cfg)
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
            rope_theta=rope_theta,
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        )

    @classmethod
    def from_pretrained(cls, model_dir: str | Path) -> LlamaConfig:
        path = Path(model_dir) / "config.json"
        if not path.is_file():
            raise ModelConfigError(f"{path} not found: model.path must be an HF checkpoint directory")
        return cls.from_hf_dict(json.loads(path.read_text()))


def _rope_theta(cfg: dict[str, Any]) -> float:
    """Plain RoPE only; transformers 5 keeps theta under `rope_parameters`."""
    params = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type not in ("default", None):
        raise ModelConfigError(f"rope_type={rope_type!r} is not supported yet (only plain RoPE)")
    return float(params.get("rope_theta", cfg.get("rope_theta", 10000.0)))
