"""Per-layer <-> stacked decoder-layer params of :mod:`relay.models.llama_flax`.

The HF-named tree has one sub-tree per layer, ``params["model"]["layers_3"]["mlp"]["up_proj"]["weight"]``
``[out, in]``. The scanned model (``scan_layers=True``) keeps the same sub-tree once, under ``"layers"``,
with every leaf stacked along a new leading axis: ``params["model"]["layers"]["mlp"]["up_proj"]["weight"]``
``[L, out, in]``, row ``3`` of which is layer 3's tensor.

Worked example (2 layers): ``{"model": {"layers_0": {"w": a}, "layers_1": {"w": b}, "norm": n}}`` ->
``{"model": {"layers": {"w": stack([a, b])}, "norm": n}}``; :func:`unstack_layers` gives back views
``stacked[0]`` and ``stacked[1]`` (numpy indexing, no copy).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

STACKED = "layers"


def is_stacked(params: Mapping[str, Any]) -> bool:
    """True when ``params`` holds its decoder layers stacked under ``params["model"]["layers"]``."""
    return STACKED in params.get("model", {})


def stack_layers(params: Mapping[str, Any], num_layers: int) -> dict[str, Any]:
    """The per-layer tree -> the stacked tree (host numpy arrays; other entries are shared, not copied)."""
    model = dict(params["model"])
    missing = [i for i in range(num_layers) if f"layers_{i}" not in model]
    if missing:
        raise ValueError(f"params lack decoder layers {missing} of {num_layers}")
    layers = [model.pop(f"layers_{i}") for i in range(num_layers)]
    model[STACKED] = jax.tree_util.tree_map(lambda *leaves: np.stack([np.asarray(x) for x in leaves]), *layers)
    return {**params, "model": model}


def unstack_layers(params: Mapping[str, Any]) -> dict[str, Any]:
    """The stacked tree -> the per-layer tree, each layer's leaves views into the stacked host arrays
    (one device-to-host transfer per stacked leaf; none on the CPU backend, where it is zero-copy).
    A tree of ``jax.ShapeDtypeStruct`` gives the per-layer shape structs."""
    if not is_stacked(params):
        return dict(params)
    model = dict(params["model"])
    stacked = jax.tree_util.tree_map(_host, model.pop(STACKED))
    count = jax.tree_util.tree_leaves(stacked)[0].shape[0]
    for i in range(count):
        model[f"layers_{i}"] = jax.tree_util.tree_map(lambda x, i=i: _row(x, i), stacked)
    return {**params, "model": model}


def _host(x: Any) -> Any:
    return x if isinstance(x, jax.ShapeDtypeStruct) else np.asarray(x)


def _row(x: Any, i: int) -> Any:
    """Row ``i`` of a stacked leaf; for a shape struct (``jax.eval_shape`` trees), the row's shape struct."""
    return jax.ShapeDtypeStruct(x.shape[1:], x.dtype) if isinstance(x, jax.ShapeDtypeStruct) else x[i]
