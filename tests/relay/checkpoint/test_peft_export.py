"""The PEFT adapter export of a LoRA run and its merge into the base model (golden values by hand)."""

import json

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from relay.checkpoint.peft_export import export_peft_adapter, is_adapter_dir, merge_adapter_dir, merged_tensors

NAME = "base_model.model.model.layers.0.self_attn.q_proj"


def test_merged_tensors_golden() -> None:
    """W = I, A = [[1, 0]] (r 1, in 2), B = [[0], [1]] (out 2), scaling 2: B A = [[0, 0], [1, 0]], so
    W + 2 B A = [[1, 0], [2, 1]]; weights the adapter does not name are the base's own arrays."""
    base = {"model.layers.0.self_attn.q_proj.weight": np.eye(2, dtype=np.float32), "model.norm.weight": np.ones(2)}
    adapter = {
        f"{NAME}.lora_A.weight": np.array([[1.0, 0.0]], np.float32),
        f"{NAME}.lora_B.weight": np.array([[0.0], [1.0]], np.float32),
    }
    merged = merged_tensors(base, adapter, scaling=2.0)
    np.testing.assert_array_equal(merged["model.layers.0.self_attn.q_proj.weight"], [[1.0, 0.0], [2.0, 1.0]])
    assert merged["model.norm.weight"] is base["model.norm.weight"]
    with pytest.raises(ValueError, match="the adapter names 'model.layers.0.self_attn.x_proj'"):
        merged_tensors(base, {k.replace("q_proj", "x_proj"): v for k, v in adapter.items()}, 2.0)


def test_an_exported_adapter_merges_into_its_base_directory(tmp_path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    (base / "config.json").write_text("{}")
    (base / "tokenizer.json").write_text("{}")
    save_file({"model.layers.0.self_attn.q_proj.weight": np.eye(2, dtype=np.float32)}, str(base / "model.safetensors"))
    adapter = {
        f"{NAME}.lora_A.weight": np.array([[1.0, 0.0]], np.float32),
        f"{NAME}.lora_B.weight": np.array([[0.0], [1.0]], np.float32),
    }
    out = export_peft_adapter(
        tmp_path / "adapter", adapter, {"r": 1, "lora_alpha": 2, "base_model_name_or_path": str(base)}
    )
    assert is_adapter_dir(out) and json.loads((out / "adapter_config.json").read_text())["r"] == 1
    merged = merge_adapter_dir(out)
    assert (merged / "tokenizer.json").is_file() and (merged / "config.json").is_file()
    weight = load_file(str(merged / "model.safetensors"))["model.layers.0.self_attn.q_proj.weight"]
    np.testing.assert_array_equal(weight, [[1.0, 0.0], [2.0, 1.0]])
