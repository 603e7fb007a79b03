"""A batch (:class:`relay.data_proto.DataProto`) and its metrics in a checkpoint, as safetensors and JSON.

A pipelined run's checkpoint holds the batches already collected for the steps after it
(``trainer.max_staleness``); they are stored like the rest of a checkpoint, never pickled, so loading one runs no
code:

- ``<name>.safetensors``: the numeric per-row arrays (``batch``);
- ``<name>.json``: the per-row Python values (``non_tensor``: text, ids, ``None``), ``meta_info`` and the metrics,
  as plain JSON (floats written exactly: Python's ``json`` writes the shortest ``repr`` that reads back the same).

A value JSON cannot hold exactly (an object of a class of its own, a set, a tuple that must stay a tuple) is
refused when the checkpoint is written, naming the field: nothing is dropped or changed silently. Numpy scalars
are written as the Python numbers they equal, and a per-row numpy array inside ``non_tensor`` as a list.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file, save_file

from relay.data_proto import DataProto


def plain(value: Any, where: str) -> Any:
    """``value`` as JSON data: dicts with string keys, lists, strings, numbers, booleans and ``None``.

    >>> plain({"n": np.int64(3), "ids": np.array([1, 2])}, "meta_info")
    {'n': 3, 'ids': [1, 2]}
    """
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return [plain(v, where) for v in value.tolist()]
    if isinstance(value, list):
        return [plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: plain(v, f"{where}.{k}") for k, v in value.items()}
    raise TypeError(f"{where}: a {type(value).__name__} cannot be stored in a checkpoint as JSON ({value!r:.80})")


def save_batch(directory: Path, name: str, batch: DataProto, metrics: dict[str, float]) -> None:
    """Write ``<name>.safetensors`` and ``<name>.json`` for ``batch`` and ``metrics`` into ``directory``."""
    arrays = {}
    for key, array in batch.batch.items():
        array = np.asarray(array)
        if array.dtype == object:
            raise TypeError(f"batch.{key}: an object array belongs in non_tensor, not in the numeric batch")
        arrays[key] = np.ascontiguousarray(array)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    save_file(arrays, str(directory / f"{name}.safetensors"))
    sidecar = {
        "rows": len(batch),
        "non_tensor": {k: plain(list(v), f"non_tensor.{k}") for k, v in batch.non_tensor.items()},
        "meta_info": plain(batch.meta_info, "meta_info"),
        "metrics": plain(metrics, "metrics"),
    }
    (directory / f"{name}.json").write_text(json.dumps(sidecar, allow_nan=True))


def load_batch(directory: Path, name: str) -> tuple[DataProto, dict[str, float]]:
    """The batch and metrics :func:`save_batch` wrote (a file that is missing or does not match raises
    ValueError naming it)."""
    directory = Path(directory)
    sidecar_path, arrays_path = directory / f"{name}.json", directory / f"{name}.safetensors"
    for path in (sidecar_path, arrays_path):
        if not path.is_file():
            raise ValueError(f"{path}: missing (a stored batch is a .safetensors and a .json file)")
    sidecar = json.loads(sidecar_path.read_text())
    arrays = load_file(str(arrays_path))
    rows = int(sidecar["rows"])
    bad = [k for k, v in {**arrays, **sidecar["non_tensor"]}.items() if len(v) != rows]
    if bad:
        raise ValueError(f"{directory}/{name}: {bad} do not have the batch's {rows} rows")
    batch = DataProto.from_dict(batch=arrays, non_tensor=sidecar["non_tensor"], meta_info=sidecar["meta_info"])
    return batch, sidecar["metrics"]
