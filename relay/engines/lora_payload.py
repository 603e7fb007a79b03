"""The weight sync of a LoRA run: the learner sends only the adapters; each engine applies them to its base.

The payload is an ordinary name -> array dict (so it travels through the object store or the learner's memory
file like full weights, :mod:`relay.shared_weights`): the adapters under PEFT's names
(``base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight`` ``[r, in]``, ``...lora_B.weight``
``[out, r]``) plus :data:`SCALING_KEY`, a one-element array holding ``alpha / r``. For SmolLM2-135M at rank 16 on
every projection that is 4.88M floats (18.6 MiB) instead of the model's 135M (0.5 GiB).

An engine that serves LoRA itself (vLLM with ``enable_lora``) loads the adapter as such; any other weight holder
(the transformers engine, the actor copy, vLLM where LoRA is unavailable) merges it into the frozen base it was
built from with :class:`BaseMerger`: ``W = W0 + (alpha / r) B A`` for each adapted weight, ``W0`` read from the
model directory (memory-mapped), every other weight the base's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

SCALING_KEY = "relay.lora_scaling"


def adapter_payload(peft_tensors: Mapping[str, np.ndarray], scaling: float) -> dict[str, np.ndarray]:
    """What the learner publishes for a LoRA sync."""
    return {**peft_tensors, SCALING_KEY: np.array([scaling], np.float32)}


def is_adapter_payload(tensors: Mapping[str, Any]) -> bool:
    return SCALING_KEY in tensors


def payload_scaling(tensors: Mapping[str, Any]) -> float:
    return float(np.asarray(tensors[SCALING_KEY]).reshape(-1)[0])


def peft_tensors(tensors: Mapping[str, Any]) -> dict[str, Any]:
    """The payload without its scaling entry: the PEFT-named adapter tensors."""
    return {k: v for k, v in tensors.items() if k != SCALING_KEY}


def payload_peft_config(tensors: Mapping[str, Any], base_model: str) -> dict[str, Any]:
    """An ``adapter_config.json`` for the payload: rank from ``lora_A``'s shape, alpha = scaling x rank, the target
    modules from the names.

    Example: ``{"...layers.0.self_attn.q_proj.lora_A.weight": [4, 64], ..., SCALING_KEY: [2.0]}`` ->
    ``r = 4``, ``lora_alpha = 8.0``, ``target_modules = ["q_proj"]``.
    """
    a_names = [k for k in tensors if k.endswith(".lora_A.weight")]
    if not a_names:
        raise ValueError("the LoRA payload holds no lora_A tensors")
    rank = int(np.asarray(tensors[a_names[0]]).shape[0])
    targets = sorted({k.removesuffix(".lora_A.weight").rsplit(".", 1)[-1] for k in a_names})
    return {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model,
        "r": rank,
        "lora_alpha": payload_scaling(tensors) * rank,
        "lora_dropout": 0.0,
        "target_modules": targets,
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
    }


class BaseMerger:
    """The frozen base weights of ``model_dir`` (HF names, never modified) and the merge of an adapter payload into
    them. The base is the checkpoint's weight files (the shards its index names, or every ``*.safetensors``), each
    tensor read when asked for and widened to float32 like the learner's (a bfloat16 checkpoint included)."""

    def __init__(self, model_dir: str | Path) -> None:
        from relay.models.checkpoint_files import open_numpy, weight_files

        self._handles = [open_numpy(f) for f in weight_files(Path(model_dir))]
        self._where = {name: h for h in self._handles for name in h.keys()}  # noqa: SIM118 (not iterable)

    def names(self) -> list[str]:
        return list(self._where)

    def base(self, name: str) -> np.ndarray:
        from relay.models.checkpoint_files import as_float32

        return as_float32(self._where[name].get_tensor(name))

    def merged(self, tensors: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Every base weight, the adapted ones as ``W0 + s B A``
        (:func:`relay.checkpoint.peft_export.merged_tensors`)."""
        from relay.checkpoint.peft_export import merged_tensors

        base = {name: self.base(name) for name in self._where}
        return merged_tensors(base, peft_tensors(tensors), payload_scaling(tensors))
