"""``python -m relay.checkpoint.export``: a run's policy copied out, a LoRA adapter merged into its base."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from relay.checkpoint.export import ExportError, checkpoint_export_dir, export, main
from relay.checkpoint.peft_export import export_peft_adapter

NAME = "base_model.model.model.layers.0.self_attn.q_proj"
WEIGHT = "model.layers.0.self_attn.q_proj.weight"


def _base(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    save_file({WEIGHT: np.eye(2, dtype=np.float32)}, str(path / "model.safetensors"))
    return path


def _lora_run(tmp_path: Path, recorded_base: str) -> Path:
    """A run directory whose config names the base and whose newest checkpoint holds an adapter recorded against
    ``recorded_base``: B A = [[0, 0], [1, 0]], scaling 2."""
    base = _base(tmp_path / "base")
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(f"model:\n  path: {base}\n")
    adapter = {
        f"{NAME}.lora_A.weight": np.array([[1.0, 0.0]], np.float32),
        f"{NAME}.lora_B.weight": np.array([[0.0], [1.0]], np.float32),
    }
    config = {"r": 1, "lora_alpha": 2, "base_model_name_or_path": recorded_base}
    export_peft_adapter(run / "checkpoints" / "step_000001" / "hf", adapter, config)
    export_peft_adapter(run / "checkpoints" / "step_000002" / "hf", adapter, config)
    return run


def test_the_newest_checkpoint_of_a_run_is_exported(tmp_path: Path) -> None:
    run = _lora_run(tmp_path, "some-org/base")
    assert checkpoint_export_dir(run) == run / "checkpoints" / "step_000002" / "hf"
    one = run / "checkpoints" / "step_000001"
    assert checkpoint_export_dir(one) == one / "hf"


def test_an_adapter_is_copied_or_merged_into_the_base_the_run_names(tmp_path: Path) -> None:
    """The recorded name is a hub name not on this machine: the run's model.path is the base."""
    run = _lora_run(tmp_path, "some-org/base")
    adapter = export(run, tmp_path / "adapter")
    assert json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"] == "some-org/base"
    merged = export(run, tmp_path / "merged", merge=True)
    assert (merged / "config.json").is_file()
    np.testing.assert_array_equal(load_file(str(merged / "model.safetensors"))[WEIGHT], [[1.0, 0.0], [2.0, 1.0]])


def test_merging_without_a_base_anywhere_names_the_fix(tmp_path: Path) -> None:
    run = _lora_run(tmp_path, "some-org/base")
    (run / "config.yaml").write_text("model:\n  path: /nowhere\n")
    with pytest.raises(ExportError, match=r"'some-org/base' is not on this machine.*--base DIR"):
        export(run, tmp_path / "merged", merge=True)
    merged = export(run, tmp_path / "merged", merge=True, base=tmp_path / "base")
    assert (merged / "model.safetensors").is_file()


def test_bad_targets_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 2
    assert "no checkpoints/step_NNNNNN there" in capsys.readouterr().err
    full = tmp_path / "full" / "checkpoints" / "step_000003" / "hf"
    _base(full)
    assert main([str(tmp_path / "full"), "--out", str(tmp_path / "o"), "--merge"]) == 2
    assert "is a full model, not a LoRA adapter" in capsys.readouterr().err
    assert main([str(tmp_path / "full"), "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "config.json").is_file() and "model: " in capsys.readouterr().out
    assert main([str(tmp_path / "full"), "--out", str(tmp_path / "o")]) == 2  # never overwrites
