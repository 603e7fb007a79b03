"""A pytree (optimizer state, params) as one safetensors file plus a JSON sidecar of its leaves.

Leaves are stored under their tree path (``jax.tree_util.keystr``), e.g.
``[1][0].mu['model']['layers_0']['mlp']['up_proj']['weight']``. Loading needs a template with the
same structure (``jax.eval_shape(tx.init, params)``): every path, shape and dtype must match the
sidecar, so a checkpoint of another model or optimizer is refused by name, never half-loaded. No
pickle: the sidecar is plain JSON and the arrays are safetensors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import numpy as np
from safetensors.numpy import load_file, save_file


def _named_leaves(tree: Any) -> list[tuple[str, Any]]:
    leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [(jax.tree_util.keystr(path), leaf) for path, leaf in leaves]


def save_tree(directory: Path, name: str, tree: Any) -> dict[str, Any]:
    """Write ``<name>.safetensors`` and ``<name>.json`` (path, shape, dtype per leaf); host arrays in."""
    arrays = {key: np.array(leaf, order="C") for key, leaf in _named_leaves(tree)}
    save_file(arrays, str(Path(directory) / f"{name}.safetensors"))
    sidecar = {"leaves": [{"path": k, "shape": list(v.shape), "dtype": str(v.dtype)} for k, v in arrays.items()]}
    (Path(directory) / f"{name}.json").write_text(json.dumps(sidecar, indent=1))
    return sidecar


def load_tree(directory: Path, name: str, template: Any) -> Any:
    """The saved tree rebuilt on ``template``'s structure (host numpy arrays as leaves)."""
    sidecar = json.loads((Path(directory) / f"{name}.json").read_text())
    saved = {leaf["path"]: leaf for leaf in sidecar["leaves"]}
    arrays = load_file(str(Path(directory) / f"{name}.safetensors"))
    expected = _named_leaves(template)
    missing = [k for k, _ in expected if k not in saved]
    extra = sorted(set(saved) - {k for k, _ in expected})
    if missing or extra:
        raise ValueError(
            f"{directory}/{name}: the checkpoint's tree does not match this model/optimizer "
            f"(missing {missing[:3]}, unexpected {extra[:3]})"
        )
    out = []
    for key, leaf in expected:
        value = arrays[key]
        if tuple(value.shape) != tuple(leaf.shape) or np.dtype(value.dtype) != np.dtype(leaf.dtype):
            raise ValueError(
                f"{directory}/{name}: {key} is {value.dtype}{list(value.shape)} in the checkpoint but "
                f"{np.dtype(leaf.dtype)}{list(leaf.shape)} here"
            )
        out.append(value)
    _, treedef = jax.tree_util.tree_flatten(template)
    return jax.tree_util.tree_unflatten(treedef, out)
