"""The weight files of an HF safetensors checkpoint directory, read as the real models ship them.

A checkpoint's weights are either the shards that ``model.safetensors.index.json`` names in its ``weight_map`` (how
Qwen2.5-3B/7B-Instruct ship: ``model-00001-of-00002.safetensors``, ...), and only those, or, with no index, every
``*.safetensors`` in the directory (one ``model.safetensors`` for the tiny and converted checkpoints).
:func:`weight_files` says which; :func:`read_float32` reads one of them with every tensor as float32 (bfloat16 and
float16 widen exactly), the dtype of the learner's master weights.

:func:`check_checkpoint` refuses, before anything starts, a checkpoint whose index names a shard that is not there, a
shard cut short, or tensors whose shapes differ from what ``config.json`` declares (another model's config, or
another model's weights). It reads the safetensors headers only (:func:`read_header`), never tensor data, so it
takes milliseconds even on a 7B checkpoint.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

INDEX_FILE = "model.safetensors.index.json"
EMBED = "model.embed_tokens.weight"
LM_HEAD = "lm_head.weight"
_HEADER_LIMIT = 100 * 2**20  # safetensors' own bound on a header's size


class CheckpointFileError(ValueError):
    """A checkpoint directory whose weight files are missing, damaged, or do not match its ``config.json``."""


@dataclass(frozen=True)
class TensorInfo:
    """Where a tensor is stored and what the header says of it (safetensors dtype names: ``F32``, ``BF16``, ...)."""

    file: Path
    dtype: str
    shape: tuple[int, ...]


def read_index(model_dir: Path) -> dict[str, str] | None:
    """``weight_map`` (tensor name -> shard file name) of the directory's index, or None without an index."""
    path = Path(model_dir) / INDEX_FILE
    if not path.is_file():
        return None
    try:
        weight_map = json.loads(path.read_text())["weight_map"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise CheckpointFileError(f"{path}: not a safetensors index with a 'weight_map' ({exc})") from None
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointFileError(f"{path}: 'weight_map' must map tensor names to shard files, got {weight_map!r}")
    return weight_map


def weight_files(model_dir: Path) -> list[Path]:
    """The files holding the checkpoint's weights: the shards the index names (every one must exist), or every
    ``*.safetensors`` when there is no index."""
    model_dir = Path(model_dir)
    weight_map = read_index(model_dir)
    if weight_map is None:
        files = sorted(model_dir.glob("*.safetensors"))
        if not files:
            raise CheckpointFileError(
                f"no *.safetensors in {model_dir}: model.path must be an HF checkpoint directory with safetensors "
                "weights (the learner reads no other format)"
            )
        return files
    by_file: dict[str, list[str]] = {}
    for name, file in weight_map.items():
        by_file.setdefault(file, []).append(name)
    missing = sorted(f for f in by_file if not (model_dir / f).is_file())
    if missing:
        first = missing[0]
        raise CheckpointFileError(
            f"{model_dir / INDEX_FILE} maps {len(by_file[first])} tensors (e.g. {sorted(by_file[first])[0]}) to "
            f"{first}, which is not in {model_dir}"
            + (f" (nor are {', '.join(missing[1:])})" if len(missing) > 1 else "")
            + "; copy or download the missing shard(s) again"
        )
    return [model_dir / f for f in sorted(by_file)]


def read_header(path: Path) -> dict[str, TensorInfo]:
    """Name -> :class:`TensorInfo` of every tensor in the safetensors file ``path``, from its header alone; a file
    whose header is unreadable or whose size differs from what the header declares (a cut-off copy) is refused."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        length = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        if not 0 < length <= min(_HEADER_LIMIT, size - 8):
            raise CheckpointFileError(f"{path}: not a safetensors file (no valid header; {size} bytes)")
        try:
            header = json.loads(f.read(length))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CheckpointFileError(f"{path}: not a safetensors file (header is not JSON: {exc})") from None
    try:
        header.pop("__metadata__", None)
        tensors = {name: TensorInfo(path, meta["dtype"], tuple(meta["shape"])) for name, meta in header.items()}
        data_end = max((int(meta["data_offsets"][1]) for meta in header.values()), default=0)
    except (AttributeError, KeyError, TypeError, IndexError, ValueError) as exc:
        raise CheckpointFileError(f"{path}: not a safetensors file (malformed header entry: {exc!r})") from None
    if size != 8 + length + data_end:
        raise CheckpointFileError(
            f"{path}: {size} bytes, but its header declares {8 + length + data_end}: the file was cut short (or "
            "padded); copy or download it again"
        )
    return tensors


def tensor_infos(model_dir: Path) -> dict[str, TensorInfo]:
    """Every tensor of the checkpoint (:func:`weight_files`), from the headers; with an index, each tensor must be
    in the shard the index names for it."""
    model_dir = Path(model_dir)
    infos: dict[str, TensorInfo] = {}
    for file in weight_files(model_dir):
        infos.update(read_header(file))
    weight_map = read_index(model_dir) or {}
    misplaced = sorted(n for n, f in weight_map.items() if n not in infos or infos[n].file.name != f)
    if misplaced:
        name = misplaced[0]
        where = f"it is in {infos[name].file.name}" if name in infos else "no shard holds it"
        raise CheckpointFileError(
            f"{model_dir / INDEX_FILE} maps {name} to {weight_map[name]}, but {where}"
            + (f" ({len(misplaced)} such tensors)" if len(misplaced) > 1 else "")
            + "; the index and the shards are from different checkpoints"
        )
    return infos


def open_numpy(path: Path) -> Any:
    """A ``safe_open`` handle on the safetensors file ``path`` that reads numpy arrays, bfloat16 ones included."""
    import ml_dtypes  # noqa: F401  (registers numpy's "bfloat16", the dtype safetensors' numpy reader asks for)
    from safetensors import safe_open

    return safe_open(str(path), framework="numpy")


def as_float32(value: np.ndarray) -> np.ndarray:
    """``value`` widened to float32 (exact from bfloat16 and float16); a float32 array is returned as it is."""
    return value if value.dtype == np.float32 else value.astype(np.float32)


def read_float32(path: Path) -> Iterator[tuple[str, np.ndarray]]:
    """``(name, float32 array)`` for every tensor of the safetensors file ``path``, one at a time (a bfloat16 shard
    is never held whole in float32 beside its bfloat16 copy). Float32 tensors are returned as stored."""
    with open_numpy(path) as f:
        for name in f.keys():  # noqa: SIM118 (a safe_open handle is not iterable)
            yield name, as_float32(f.get_tensor(name))


def expected_shapes(config: dict[str, Any], source: str = "config.json") -> dict[str, tuple[tuple[int, ...], str]]:
    """HF name -> (shape, the config keys it follows) for the embedding, an untied head and every decoder layer's
    projections, from an HF Llama/Qwen2 ``config.json`` (``source``: its path, for the error)."""
    try:
        vocab, hidden = int(config["vocab_size"]), int(config["hidden_size"])
        inter, layers = int(config["intermediate_size"]), int(config["num_hidden_layers"])
        heads = int(config["num_attention_heads"])
    except KeyError as exc:
        raise CheckpointFileError(f"{source} has no {exc.args[0]!r}") from None
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    vocab_keys = f"vocab_size={vocab}, hidden_size={hidden}"
    attn = f"num_attention_heads={heads}, head_dim={head_dim}, hidden_size={hidden}"
    kv = f"num_key_value_heads={kv_heads}, head_dim={head_dim}, hidden_size={hidden}"
    mlp = f"intermediate_size={inter}, hidden_size={hidden}"
    shapes = {EMBED: ((vocab, hidden), vocab_keys)}
    if not config.get("tie_word_embeddings", False):
        shapes[LM_HEAD] = ((vocab, hidden), vocab_keys + ", tie_word_embeddings=false")
    for i in range(layers):
        p = f"model.layers.{i}"
        shapes |= {
            f"{p}.self_attn.q_proj.weight": ((heads * head_dim, hidden), attn),
            f"{p}.self_attn.k_proj.weight": ((kv_heads * head_dim, hidden), kv),
            f"{p}.self_attn.v_proj.weight": ((kv_heads * head_dim, hidden), kv),
            f"{p}.self_attn.o_proj.weight": ((hidden, heads * head_dim), attn),
            f"{p}.mlp.gate_proj.weight": ((inter, hidden), mlp),
            f"{p}.mlp.up_proj.weight": ((inter, hidden), mlp),
            f"{p}.mlp.down_proj.weight": ((hidden, inter), mlp),
        }
    return shapes


def check_checkpoint(model_dir: Path) -> None:
    """Refuse a checkpoint directory whose weight files are not all there, are cut short, or do not match its
    ``config.json`` (every tensor :func:`expected_shapes` lists must exist with that shape). Headers only."""
    model_dir = Path(model_dir)
    config_path = model_dir / "config.json"
    try:
        config = json.loads(config_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointFileError(f"{config_path}: unreadable ({exc})") from None
    infos = tensor_infos(model_dir)
    problems = []
    for name, (shape, keys) in expected_shapes(config, str(config_path)).items():
        if name not in infos:
            problems.append(f"{name} is in no weight file ({config_path.name} declares it: {keys})")
        elif infos[name].shape != shape:
            problems.append(
                f"{infos[name].file.name}: {name} has shape {infos[name].shape}, but {config_path.name} ({keys}) "
                f"declares {shape}"
            )
    if problems:
        shown = "; ".join(problems[:3]) + (f"; ... ({len(problems)} problems)" if len(problems) > 3 else "")
        raise CheckpointFileError(
            f"{model_dir}: the weights do not match config.json: {shown}; config.json and the weights must come "
            "from the same model"
        )
