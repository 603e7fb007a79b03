"""The learner's device mesh and the rules that shard parameters, optimizer state and batches over it.

Mesh axes: ``dp`` (data parallel: parameters replicated), ``fsdp`` (data parallel with parameters
and optimizer state sharded, gathered per use by XLA) and ``tp`` (tensor parallel: attention heads
and MLP width split). Batches are split on ``("dp", "fsdp")`` along the sequence-row axis.

Parameters keep HF layouts (``[out, in]`` for linear weights), so the rules read::

    q/k/v, gate/up proj  [out, in] -> P("tp", "fsdp")   column-parallel
    o, down proj         [out, in] -> P("fsdp", "tp")   row-parallel
    q/k/v biases         [out]     -> P("tp")          (an o_proj bias stays replicated)
    embed_tokens, lm_head [V, H]   -> P("tp", "fsdp")   vocab-parallel
    norms                [H]       -> P()               replicated
    stacked layers       [L, ...]  -> P(None, <the layer's spec>)
    LoRA adapters (the ``lora`` collection, :mod:`relay.models.lora`) follow the weight they adapt, so
    ``x A^T`` and ``(x A^T) B^T`` are split like ``x W^T``:
    lora_A of q/k/v/gate/up [r, in] -> P(None, "fsdp"); lora_B [out, r] -> P("tp", None)
    lora_A of o/down        [r, in] -> P(None, "tp");   lora_B [out, r] -> P("fsdp", None)

A dimension that does not divide by its axis size is left unsharded on that axis (XLA would
otherwise pad), so any mesh is valid for any model; :func:`describe_sharding` shows the result.

Example: 8 devices as ``{dp: 2, fsdp: 2, tp: 2}``: a ``q_proj`` weight ``[576, 576]`` is stored as
``[288, 288]`` blocks, one per (tp, fsdp) pair, replicated over the 2 ``dp`` groups.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

AXES = ("dp", "fsdp", "tp")
DATA_AXES = ("dp", "fsdp")

_COLUMN = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")
_ROW = ("o_proj", "down_proj")


class MeshError(ValueError):
    """A mesh shape that does not match the learner's devices; the message names the keys."""


def mesh_shape(sizes: Mapping[str, int], device_count: int) -> dict[str, int]:
    """Resolve ``-1`` (at most one axis: the rest of the devices) and check the product.

    Example: ``{dp: -1, fsdp: 2, tp: 1}`` on 8 devices -> ``{dp: 4, fsdp: 2, tp: 1}``.
    """
    out = {a: int(sizes.get(a, 1)) for a in AXES}
    free = [a for a, v in out.items() if v == -1]
    if len(free) > 1:
        raise MeshError(f"learner.mesh: only one axis may be -1, got {free}")
    fixed = int(np.prod([v for v in out.values() if v != -1]))
    if any(v == 0 or v < -1 for v in out.values()):
        raise MeshError(f"learner.mesh={out}: sizes must be >= 1 (or -1 for the rest)")
    if free:
        if device_count % fixed:
            raise MeshError(f"learner.mesh={dict(sizes)}: {device_count} devices do not divide by {fixed}")
        out[free[0]] = device_count // fixed
    if int(np.prod(list(out.values()))) != device_count:
        raise MeshError(
            f"learner.mesh={out} covers {int(np.prod(list(out.values())))} devices but the learner has "
            f"{device_count} (learner.hosts x learner.devices_per_host); make the product match or use -1"
        )
    return out


def build_mesh(sizes: Mapping[str, int], devices: Sequence[Any] | None = None) -> Mesh:
    """A ``(dp, fsdp, tp)`` mesh over ``devices`` (default: every device of the JAX job)."""
    devices = list(jax.devices() if devices is None else devices)
    shape = mesh_shape(sizes, len(devices))
    grid = np.asarray(devices, dtype=object).reshape([shape[a] for a in AXES])
    return Mesh(grid, AXES)


def _fits(dim: int, axis: str | None, mesh: Mesh) -> str | None:
    return axis if axis is not None and dim % mesh.shape[axis] == 0 else None


def param_spec(path: Sequence[str], shape: Sequence[int], mesh: Mesh) -> P:
    """The partition spec of one parameter from its tree path (HF-named) and shape. A stacked decoder
    layer leaf (``model.layers.*``, ``[L, ...]``: :mod:`relay.models.layer_stack`) is sharded as one layer's
    tensor, its layer axis unsharded."""
    if len(path) > 2 and tuple(path[:2]) == ("model", "layers"):
        return P(None, *param_spec(("model", "layers_0", *path[2:]), shape[1:], mesh))
    name = path[-2] if path[-1] in ("weight", "bias") else path[-1]
    if len(shape) == 2 and path[-1] in ("lora_A", "lora_B") and path[-2] in _COLUMN + _ROW:
        out_axis, in_axis = ("tp", "fsdp") if path[-2] in _COLUMN else ("fsdp", "tp")
        wanted = (None, in_axis) if path[-1] == "lora_A" else (out_axis, None)
    elif len(shape) == 2 and (name in _COLUMN or name in ("embed_tokens", "lm_head")):
        wanted = ("tp", "fsdp")
    elif len(shape) == 2 and name in _ROW:
        wanted = ("fsdp", "tp")
    elif len(shape) == 1 and path[-1] == "bias" and name in _COLUMN:
        wanted = ("tp",)
    else:
        return P()
    return P(*(_fits(d, a, mesh) for d, a in zip(shape, wanted, strict=True)))


def _path_names(path: Sequence[Any]) -> tuple[str, ...]:
    return tuple(str(getattr(k, "key", getattr(k, "name", k))) for k in path)


def param_shardings(params: Any, mesh: Mesh) -> Any:
    """A tree of :class:`NamedSharding` matching ``params`` (arrays or shape structs)."""
    return jax.tree_util.tree_map_with_path(
        lambda path, x: NamedSharding(mesh, param_spec(_path_names(path), x.shape, mesh)), params
    )


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def opt_state_shardings(tx: Any, opt_state: Any, params_sharding: Any, mesh: Mesh) -> Any:
    """Optimizer-state leaves shaped like a parameter get that parameter's sharding; the rest
    (step counts, scalars) are replicated."""
    import optax

    rep = replicated(mesh)
    shard_like = optax.tree_utils.tree_map_params(
        tx,
        lambda _p, s: s,
        opt_state,
        params_sharding,
        transform_non_params=lambda _: rep,
        is_leaf=lambda x: isinstance(x, NamedSharding),
    )
    return shard_like


def batch_sharding(mesh: Mesh, ndim: int, row_axis: int = 1) -> NamedSharding:
    """Rows (axis ``row_axis``; axis 0 is the micro-step axis) split over the data axes."""
    spec = [None] * ndim
    spec[row_axis] = DATA_AXES
    return NamedSharding(mesh, P(*spec))


def describe_sharding(params: Any, mesh: Mesh) -> list[str]:
    """``name: shape -> spec`` per parameter, for logs and tests."""
    lines = []
    for path, x in jax.tree_util.tree_leaves_with_path(params):
        names = _path_names(path)
        lines.append(f"{'.'.join(names)}: {tuple(x.shape)} -> {param_spec(names, x.shape, mesh)}")
    return lines


def place_host_tree(host_tree: Any, shardings: Any) -> Any:
    """Host arrays (identical on every process) -> global arrays laid out by ``shardings`` (same tree)."""
    return jax.tree_util.tree_map(
        lambda x, s: jax.make_array_from_callback(x.shape, s, lambda idx: x[idx]), host_tree, shardings
    )


def host_tree(tree: Any) -> Any:
    """``tree``'s leaves as host arrays, gathered from every process when there are several (a collective)."""
    if jax.process_count() > 1:
        return multihost_utils.process_allgather(tree, tiled=True)
    return tree  # numpy views of the CPU arrays where the leaves are read (unstack_layers, merged_weights)
