"""The decoder sizes a memory estimate depends on, read from a checkpoint's HF ``config.json``, and parameter counts.

:func:`model_shapes` reads the policy's (``model.path``) and, in solver mode, the solver's; :func:`count_params`
and :func:`lora_param_count` count a decoder's and its LoRA adapters' parameters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class ModelShapeError(ValueError):
    """The model's config.json lacks a field the estimate needs."""


@dataclass(frozen=True)
class ModelShape:
    """The decoder sizes memory depends on (HF ``config.json`` names in the docstring of each field)."""

    hidden: int  # hidden_size
    layers: int  # num_hidden_layers
    heads: int  # num_attention_heads
    kv_heads: int  # num_key_value_heads (default: heads)
    head_dim: int  # head_dim (default: hidden / heads)
    intermediate: int  # intermediate_size
    vocab: int  # vocab_size
    tied: bool  # tie_word_embeddings
    qkv_bias: bool = False  # qwen2, or llama's and qwen3's attention_bias
    o_bias: bool = False  # llama's and qwen3's attention_bias
    mlp_bias: bool = False  # llama's mlp_bias
    qk_norm: bool = False  # qwen3: an RMSNorm weight of head_dim on queries and on keys

    @classmethod
    def from_hf_config(cls, cfg: Mapping[str, Any]) -> ModelShape:
        """Example: SmolLM2-135M's config -> ``ModelShape(576, 30, 9, 3, 64, 1536, 49152, tied=True)``."""
        try:
            heads = int(cfg["num_attention_heads"])
            hidden = int(cfg["hidden_size"])
            family = cfg.get("model_type")
            qwen2 = family == "qwen2"
            attention_bias = bool(cfg.get("attention_bias", False))
            return cls(
                hidden=hidden,
                layers=int(cfg["num_hidden_layers"]),
                heads=heads,
                kv_heads=int(cfg.get("num_key_value_heads") or heads),
                head_dim=int(cfg.get("head_dim") or hidden // heads),
                intermediate=int(cfg["intermediate_size"]),
                vocab=int(cfg["vocab_size"]),
                tied=bool(cfg.get("tie_word_embeddings", False)),
                qkv_bias=qwen2 or attention_bias,
                o_bias=attention_bias and not qwen2,
                mlp_bias=bool(cfg.get("mlp_bias", False)) and family == "llama",
                qk_norm=family == "qwen3",
            )
        except KeyError as exc:
            raise ModelShapeError(f"config.json has no {exc.args[0]!r}") from None


def read_model_shape(model_dir: str | Path) -> ModelShape:
    """The :class:`ModelShape` of the HF checkpoint directory ``model_dir`` (its ``config.json``)."""
    return ModelShape.from_hf_config(json.loads((Path(model_dir) / "config.json").read_text()))


def model_shapes(cfg: Any) -> tuple[ModelShape, ModelShape | None]:
    """The policy's shape (``model.path``) and, in solver mode, the solver's; raises ``ModelPathError`` or
    ``OSError`` when a checkpoint is not there."""
    from relay.models.paths import resolve_model_path, solver_model_path

    policy_dir = resolve_model_path(cfg.model.path)
    solver = None
    if cfg.reward.mode == "solver":
        solver = read_model_shape(solver_model_path(cfg, policy_dir))
    return read_model_shape(policy_dir), solver


def lora_param_count(s: ModelShape, lora: Any) -> int:
    """Adapter parameters of ``model.lora``: ``layers x rank x (in + out)`` per target projection.

    Example: SmolLM2-135M (576 hidden, 9 heads / 3 KV heads of 64, 1536 MLP, 30 layers), rank 16 on all seven
    projections: ``30 x 16 x (1152 + 768 + 768 + 1152 + 3 x 2112) = 4,884,480``.
    """
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    sizes = {
        "q_proj": s.hidden + q,
        "k_proj": s.hidden + kv,
        "v_proj": s.hidden + kv,
        "o_proj": q + s.hidden,
        "gate_proj": s.hidden + s.intermediate,
        "up_proj": s.hidden + s.intermediate,
        "down_proj": s.intermediate + s.hidden,
    }
    return s.layers * int(lora.rank) * sum(sizes[m] for m in lora.target_modules)


def count_params(s: ModelShape) -> int:
    """Parameters of a Llama/Qwen2/Qwen3 decoder: embeddings, per layer attention + MLP + 2 norms (+ Qwen3's q/k
    norms), final norm, and the LM head unless tied.

    Worked example (SmolLM2-135M): embed 49152 x 576 = 28,311,552; per layer q/o 2 x 576 x 576, k/v
    2 x 576 x 192, MLP 3 x 576 x 1536, norms 2 x 576 = 3,540,096; 30 layers + final norm 576 -> 134,515,008.
    """
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    attention = s.hidden * q + 2 * s.hidden * kv + q * s.hidden
    attention += (q + 2 * kv if s.qkv_bias else 0) + (s.hidden if s.o_bias else 0)
    mlp = 3 * s.hidden * s.intermediate + (2 * s.intermediate + s.hidden if s.mlp_bias else 0)
    layer = attention + mlp + 2 * s.hidden + (2 * s.head_dim if s.qk_norm else 0)
    return s.vocab * s.hidden * (1 if s.tied else 2) + s.layers * layer + s.hidden
