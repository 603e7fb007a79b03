"""Checkpoints as the real models ship them (bfloat16 shards + index): the learner reads exactly the shards the index
names, as float32, and a checkpoint that is incomplete or belongs to another config is refused from its headers."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import jax
import ml_dtypes
import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from relay.models.checkpoint_files import INDEX_FILE, CheckpointFileError, check_checkpoint, read_header
from relay.models.hf_params import load_hf_checkpoint
from relay.models.llama_config import LlamaConfig


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _flat(params: dict) -> dict[str, np.ndarray]:
    return {jax.tree_util.keystr(k): np.asarray(v) for k, v in jax.tree_util.tree_leaves_with_path(params)}


def test_bfloat16_shards_load_as_the_float32_copy_rounded_to_bfloat16(
    tiny_sharded_qwen2_dir, tiny_qwen2_float32_dir
) -> None:
    """Same model, two layouts: the sharded bfloat16 one loads as float32 masters equal, bit for bit, to the float32
    single file's weights cast to bfloat16 and back."""
    config = LlamaConfig.from_pretrained(tiny_sharded_qwen2_dir)
    sharded = _flat(load_hf_checkpoint(tiny_sharded_qwen2_dir, config))
    full = _flat(load_hf_checkpoint(tiny_qwen2_float32_dir, LlamaConfig.from_pretrained(tiny_qwen2_float32_dir)))
    assert sharded.keys() == full.keys() and len(sharded) == 2 + 2 * 12  # embed, norm, 12 per layer
    rounded = {k: v.astype(ml_dtypes.bfloat16).astype(np.float32) for k, v in full.items()}
    for name, value in sharded.items():
        assert value.dtype == np.float32, name
        np.testing.assert_array_equal(value, rounded[name], err_msg=name)
    assert any(not np.array_equal(full[k], rounded[k]) for k in full)  # the rounding is real: the test can fail


def test_only_the_shards_the_index_names_are_read(tiny_sharded_qwen2_dir, tmp_path) -> None:
    """A stale ``model.safetensors`` beside the shards (a re-saved directory) is not read: the index decides."""
    model_dir = _copy(tiny_sharded_qwen2_dir, tmp_path / "m")
    config = LlamaConfig.from_pretrained(model_dir)
    stale = {"model.embed_tokens.weight": torch.zeros(config.vocab_size, config.hidden_size)}
    save_file(stale, str(model_dir / "model.safetensors"))
    embed = load_hf_checkpoint(model_dir, config)["model"]["embed_tokens"]
    assert np.abs(embed).max() > 0
    check_checkpoint(model_dir)


def test_a_sharded_checkpoint_passes_the_check(tiny_sharded_qwen2_dir, tiny_model_dir) -> None:
    check_checkpoint(tiny_sharded_qwen2_dir)
    check_checkpoint(tiny_model_dir)


def test_a_shard_missing_from_the_index_is_named(tiny_sharded_qwen2_dir, tmp_path) -> None:
    model_dir = _copy(tiny_sharded_qwen2_dir, tmp_path / "m")
    shard = json.loads((model_dir / INDEX_FILE).read_text())["weight_map"]["model.layers.0.self_attn.q_proj.weight"]
    (model_dir / shard).unlink()
    with pytest.raises(CheckpointFileError) as info:
        check_checkpoint(model_dir)
    message = str(info.value)
    assert f"{model_dir / INDEX_FILE} maps" in message and f"to {shard}, which is not in {model_dir}" in message
    assert "download the missing shard" in message
    with pytest.raises(CheckpointFileError, match=shard):  # the learner's loader refuses it the same way
        load_hf_checkpoint(model_dir, LlamaConfig.from_pretrained(model_dir))


def _edit_config(model_dir: Path, **changes: int) -> None:
    config = json.loads((model_dir / "config.json").read_text())
    (model_dir / "config.json").write_text(json.dumps({**config, **changes}))


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"vocab_size": 32000}, "model.embed_tokens.weight has shape (49152, 64), but config.json (vocab_size=32000"),
        (
            {"hidden_size": 128},
            "model.embed_tokens.weight has shape (49152, 64), but config.json (vocab_size=49152, hidden_size=128)",
        ),
        (
            {"num_attention_heads": 4, "head_dim": 32},
            "model.layers.0.self_attn.q_proj.weight has shape (64, 64), but config.json (num_attention_heads=4, "
            "head_dim=32, hidden_size=64) declares (128, 64)",
        ),
        ({"num_hidden_layers": 3}, "model.layers.2.self_attn.q_proj.weight is in no weight file"),
    ],
)
def test_a_config_not_matching_the_weights_is_named(
    tiny_sharded_qwen2_dir, tmp_path, changes: dict[str, int], expected: str
) -> None:
    model_dir = _copy(tiny_sharded_qwen2_dir, tmp_path / "m")
    _edit_config(model_dir, **changes)
    with pytest.raises(CheckpointFileError) as info:
        check_checkpoint(model_dir)
    message = str(info.value)
    assert expected in message and str(model_dir) in message
    assert "must come from the same model" in message


def test_a_cut_short_shard_is_refused(tiny_sharded_qwen2_dir, tmp_path) -> None:
    model_dir = _copy(tiny_sharded_qwen2_dir, tmp_path / "m")
    shard = sorted(model_dir.glob("model-*.safetensors"))[0]
    size = shard.stat().st_size
    with shard.open("r+b") as f:
        f.truncate(size - 1000)
    with pytest.raises(CheckpointFileError, match=rf"{shard}: {size - 1000} bytes, but its header declares {size}"):
        check_checkpoint(model_dir)


def test_headers_give_dtypes_and_shapes_without_the_data(tiny_sharded_qwen2_dir) -> None:
    infos = {}
    for shard in sorted(tiny_sharded_qwen2_dir.glob("model-*.safetensors")):
        infos |= read_header(shard)
    embed = infos["model.embed_tokens.weight"]
    assert (embed.dtype, embed.shape) == ("BF16", (49152, 64))
    assert infos["model.layers.1.self_attn.q_proj.bias"].shape == (64,)


def test_an_index_that_does_not_match_its_shards_is_refused(tiny_sharded_qwen2_dir, tmp_path) -> None:
    model_dir = _copy(tiny_sharded_qwen2_dir, tmp_path / "m")
    index = json.loads((model_dir / INDEX_FILE).read_text())
    shards = sorted(set(index["weight_map"].values()))
    wrong = next(s for s in shards if s != index["weight_map"]["model.norm.weight"])
    index["weight_map"]["model.norm.weight"] = wrong
    (model_dir / INDEX_FILE).write_text(json.dumps(index))
    with pytest.raises(CheckpointFileError, match=rf"maps model.norm.weight to {wrong}, but it is in model-"):
        check_checkpoint(model_dir)


def _with_header(header: bytes) -> bytes:
    return struct.pack("<Q", len(header)) + header


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "no valid header"),
        (b"not a checkpoint at all", "no valid header"),
        (_with_header(b"{not json}"), "header is not JSON"),
        (_with_header(b'{"a": {"dtype": "F32"}}'), "malformed header entry"),
    ],
)
def test_a_file_that_is_not_safetensors_is_named(tmp_path, content: bytes, why: str) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(content)
    with pytest.raises(CheckpointFileError, match=rf"{path}: not a safetensors file \({why}"):
        read_header(path)
