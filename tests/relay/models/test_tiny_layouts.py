"""The tiny builders write the real checkpoints' on-disk layouts: float32 in one file by default, and on request
bfloat16 shards named by ``model.safetensors.index.json`` (how Qwen2.5-3B/7B-Instruct ship)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from safetensors import safe_open

from relay.repo import REPO_ROOT

INDEX = "model.safetensors.index.json"


def _dtypes(path: Path) -> dict[str, str]:
    with safe_open(str(path), framework="pt") as f:
        return {name: str(f.get_slice(name).get_dtype()) for name in f.keys()}  # noqa: SIM118 (not iterable)


def test_default_layout_is_one_float32_file(tiny_model_dir) -> None:
    assert not (tiny_model_dir / INDEX).exists()
    assert [p.name for p in tiny_model_dir.glob("*.safetensors")] == ["model.safetensors"]
    assert set(_dtypes(tiny_model_dir / "model.safetensors").values()) == {"F32"}


def test_sharded_bfloat16_qwen2_layout(tiny_sharded_qwen2_dir) -> None:
    index = json.loads((tiny_sharded_qwen2_dir / INDEX).read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) >= 2
    assert sorted(p.name for p in tiny_sharded_qwen2_dir.glob("*.safetensors")) == shards
    stored: dict[str, str] = {}
    for shard in shards:
        dtypes = _dtypes(tiny_sharded_qwen2_dir / shard)
        assert all(index["weight_map"][name] == shard for name in dtypes)  # the index says where each tensor is
        stored.update(dtypes)
    assert stored.keys() == index["weight_map"].keys()
    assert set(stored.values()) == {"BF16"}
    config = json.loads((tiny_sharded_qwen2_dir / "config.json").read_text())
    assert config["model_type"] == "qwen2" and config["tie_word_embeddings"] and config["dtype"] == "bfloat16"
    assert "lm_head.weight" not in stored and "model.layers.0.self_attn.q_proj.bias" in stored


def test_cli_writes_the_sharded_layout(tmp_path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "relay.models.tiny", "--out", str(tmp_path / "m"), "--family", "qwen2", "--shards"]
        + ["--dtype", "bfloat16"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    index = json.loads((tmp_path / "m" / INDEX).read_text())
    assert len(set(index["weight_map"].values())) >= 2
    assert json.loads((tmp_path / "m" / "config.json").read_text())["dtype"] == "bfloat16"
