"""The learner's weights as host arrays under the names other programs read: HF names for a weight sync or an HF
export (full weights, or with LoRA the base with the adapters merged in), PEFT's names for the adapters alone."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from relay.learner.sharding import host_tree
from relay.models.hf_params import params_to_hf
from relay.models.layer_stack import unstack_layers
from relay.models.lora import merged_weights, peft_state_dict
from relay.models.lora_spec import LoraSpec

EXPORT_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}


def hf_weights(params: Any, adapters: Any, lora: LoraSpec | None, dtype: str = "float32") -> dict[str, np.ndarray]:
    """The weights of the stacked-layer ``params`` (with ``lora``, merged with ``adapters``) under HF names as host
    arrays of ``dtype`` (``float32``, ``bfloat16`` or ``float16``; a weight sync asks for the rollout engine's,
    :func:`relay.config.derive._weight_sync_dtype`). Each tensor is cast on its devices before it is copied to the
    host, one tensor at a time: a bfloat16 export moves half the bytes and holds at most one tensor's 16-bit copy on
    a device. With LoRA the base with the adapters merged in (``W + s B A``, on the host in float32, then cast; a
    LoRA sync and export send :func:`peft_adapters` instead). On several processes every process must call it (the
    sharded params are gathered with a collective)."""
    target = EXPORT_DTYPES[dtype]
    if lora is not None:
        merged = merged_weights(host_tree(params), host_tree(adapters), lora.scaling)
        return {k: np.asarray(v, dtype=target) for k, v in params_to_hf(unstack_layers(merged)).items()}
    params = jax.tree_util.tree_map(lambda p: np.asarray(host_tree(p.astype(target))), params)
    return params_to_hf(unstack_layers(params))


def peft_adapters(adapters: Any) -> dict[str, np.ndarray]:
    """The LoRA ``adapters`` under PEFT's per-layer names (:func:`relay.models.lora.peft_state_dict`), host arrays;
    every process must call it."""
    return peft_state_dict(host_tree(adapters))
