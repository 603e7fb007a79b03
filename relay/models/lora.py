"""LoRA adapters for the flax Llama of :mod:`relay.models.llama_flax` (``model.lora``).

A LoRA adapter on a linear layer ``y = x W^T`` (``W`` ``[out, in]``, HF layout) adds a low-rank update:

    y = x W^T + s * (x A^T) B^T,    A [r, in], B [out, r], s = alpha / r

``A`` starts random and ``B`` at zero, so a fresh adapter leaves the model unchanged. The adapters live in their
own variable collection, ``"lora"``, with the same module paths as the weights they adapt:
``adapters["model"]["layers"]["self_attn"]["q_proj"] = {"lora_A": [L, r, in], "lora_B": [L, out, r]}`` (stacked
over the ``L`` decoder layers like the scanned params). The model applies them when the collection is passed,
``model.apply({"params": base, "lora": adapters}, ...)``, and is the plain model without it: the base weights
are never copied or modified, and the reference policy is the same call without ``"lora"``.

PEFT stores the same tensors per layer under ``base_model.model.<HF module name>.lora_A.weight`` (``[r, in]``) and
``...lora_B.weight`` (``[out, r]``), with ``scaling = lora_alpha / r``: :func:`peft_state_dict` writes those names.

Worked example: rank 2, alpha 4 (s = 2), ``W = I``, ``A = I``, ``B = [[0, 1], [0, 0]]``, ``x = [0, 1]``:
``x W^T = [0, 1]``, ``x A^T = [0, 1]``, ``(x A^T) B^T = [1, 0]``, so ``y = [0, 1] + 2 * [1, 0] = [2, 1]``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from relay.models.llama_config import LlamaConfig
from relay.models.lora_spec import ATTENTION_MODULES, LoraSpec


def _shapes(config: LlamaConfig) -> dict[str, tuple[int, int]]:
    """``(out, in)`` of each target projection."""
    h, d = config.hidden_size, config.head_dim
    q, kv, inter = config.num_attention_heads * d, config.num_key_value_heads * d, config.intermediate_size
    return {
        "q_proj": (q, h),
        "k_proj": (kv, h),
        "v_proj": (kv, h),
        "o_proj": (h, q),
        "gate_proj": (inter, h),
        "up_proj": (inter, h),
        "down_proj": (h, inter),
    }


def _parent(module: str) -> str:
    return "self_attn" if module in ATTENTION_MODULES else "mlp"


def init_adapters(config: LlamaConfig, spec: LoraSpec, seed: int) -> dict[str, Any]:
    """Fresh stacked adapters (host float32): ``A`` uniform in ``+-1/sqrt(in)`` (PEFT's default Kaiming-uniform
    bound with ``a = sqrt(5)``), ``B`` zero."""
    rng = np.random.default_rng(seed)
    layers = config.num_hidden_layers
    tree: dict[str, Any] = {}
    for module in spec.target_modules:
        out_features, in_features = _shapes(config)[module]
        bound = 1.0 / math.sqrt(in_features)
        a = rng.uniform(-bound, bound, (layers, spec.rank, in_features)).astype(np.float32)
        b = np.zeros((layers, out_features, spec.rank), np.float32)
        tree.setdefault(_parent(module), {})[module] = {"lora_A": a, "lora_B": b}
    return {"model": {"layers": tree}}


def lora_delta(x: jax.Array, a: jax.Array, b: jax.Array, scaling: float) -> jax.Array:
    """``scaling * (x A^T) B^T`` for ``x`` ``[..., in]``, ``A`` ``[r, in]``, ``B`` ``[out, r]``."""
    low = jnp.einsum("...i,ri->...r", x, a.astype(x.dtype))
    return scaling * jnp.einsum("...r,or->...o", low, b.astype(x.dtype))


def merged_weights(params: Mapping[str, Any], adapters: Mapping[str, Any], scaling: float) -> dict[str, Any]:
    """The stacked params with every adapted ``W`` replaced by ``W + s B A`` (new arrays for those leaves only;
    the others are shared). For engines that cannot serve an adapter, and for checks."""
    model = dict(params["model"])
    layers = {k: dict(v) for k, v in model["layers"].items()}
    for parent, modules in adapters["model"]["layers"].items():
        for module, ab in modules.items():
            w = layers[parent][module]["weight"]
            delta = np.einsum("lor,lri->loi", np.asarray(ab["lora_B"]), np.asarray(ab["lora_A"]))
            layers[parent][module] = {**layers[parent][module], "weight": np.asarray(w) + scaling * delta}
    model["layers"] = layers
    return {**params, "model": model}


def peft_state_dict(adapters: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Per-layer PEFT names -> host arrays: ``base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight``."""
    out: dict[str, np.ndarray] = {}
    for parent, modules in adapters["model"]["layers"].items():
        for module, ab in modules.items():
            for key in ("lora_A", "lora_B"):
                stacked = np.asarray(ab[key])
                for i in range(stacked.shape[0]):
                    out[f"base_model.model.model.layers.{i}.{parent}.{module}.{key}.weight"] = stacked[i]
    return out


def peft_config(spec: LoraSpec, base_model: str) -> dict[str, Any]:
    """The ``adapter_config.json`` PEFT reads for these adapters."""
    return {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model,
        "r": spec.rank,
        "lora_alpha": spec.alpha,
        "lora_dropout": spec.dropout,
        "target_modules": sorted(spec.target_modules),
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
    }
