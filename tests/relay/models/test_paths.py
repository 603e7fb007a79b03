"""The base model name a LoRA adapter records: portable across machines."""

from __future__ import annotations

import json
from pathlib import Path

from relay.models.paths import local_model_dir, portable_model_name
from relay.models.prepare_smollm2 import HUB_NAME


def test_the_built_in_smollm2_is_its_hub_name(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("RELAY_HOME", str(tmp_path))
    converted = tmp_path / "models" / "SmolLM2-135M-Instruct"
    converted.mkdir(parents=True)
    (converted / "config.json").write_text("{}")
    assert portable_model_name(converted) == HUB_NAME
    assert local_model_dir(HUB_NAME) == converted and local_model_dir("smollm2-135m") == converted


def test_another_directory_is_the_name_it_was_saved_from_else_its_own(tmp_path: Path) -> None:
    saved = tmp_path / "qwen"
    saved.mkdir()
    (saved / "config.json").write_text(json.dumps({"_name_or_path": "Qwen/Qwen2.5-3B-Instruct"}))
    assert portable_model_name(saved) == "Qwen/Qwen2.5-3B-Instruct"
    local = tmp_path / "my-model"
    local.mkdir()
    (local / "config.json").write_text(json.dumps({"_name_or_path": "/abs/path/to/it"}))
    assert portable_model_name(local) == "my-model"
    assert local_model_dir(str(local)) == local and local_model_dir("some-org/absent") is None
