"""A LoRA run's export: a PEFT adapter directory, and the merged HF model it stands for.

``trainer.export_hf`` with ``model.lora`` writes ``adapter_config.json`` + ``adapter_model.safetensors`` (PEFT's
names and layout, :func:`relay.models.lora.peft_state_dict`) instead of a whole model: tens of MB for a rank-16
adapter of a 3B model, where the merged model would be 6 GB per checkpoint. ``peft`` loads it onto the base model
(``PeftModel.from_pretrained(base, dir)``); :func:`merge_adapter_dir` gives engines that take a plain HF directory
(``driver.evaluate``) the merged model: ``W + (lora_alpha / r) B A`` for every adapted weight.

Worked example of the names: ``base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight`` ``[r, in]`` and
``...lora_B.weight`` ``[out, r]`` adapt ``model.layers.3.self_attn.q_proj.weight`` ``[out, in]``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file, save_file

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
_PREFIX = "base_model.model."


def is_adapter_dir(path: Path | str) -> bool:
    return (Path(path) / ADAPTER_CONFIG).is_file()


def export_peft_adapter(out_dir: Path | str, tensors: Mapping[str, np.ndarray], config: Mapping[str, Any]) -> Path:
    """``out_dir`` gets the adapter (``tensors`` under PEFT names) and ``config`` as ``adapter_config.json``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: np.array(v, order="C") for k, v in tensors.items()}, str(out / ADAPTER_WEIGHTS), {"format": "pt"})
    (out / ADAPTER_CONFIG).write_text(json.dumps(dict(config), indent=1))
    return out


def merged_tensors(base: Mapping[str, np.ndarray], adapter: Mapping[str, np.ndarray], scaling: float) -> dict:
    """``base`` (HF names) with every weight the PEFT ``adapter`` names replaced by ``W + scaling B A``."""
    merged = dict(base)
    for name, a in adapter.items():
        if not name.endswith(".lora_A.weight"):
            continue
        module = name.removeprefix(_PREFIX).removesuffix(".lora_A.weight")
        b = adapter[name.replace(".lora_A.", ".lora_B.")]
        weight = f"{module}.weight"
        if weight not in base:
            raise ValueError(f"the adapter names {module!r}, which the base model does not have")
        a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
        merged[weight] = (base[weight].astype(np.float32) + scaling * (b @ a)).astype(base[weight].dtype)
    return merged


def adapter_base_dir(adapter_dir: Path | str, base_model_dir: Path | str | None = None) -> Path:
    """The local directory of the adapter's base model: ``base_model_dir`` if given, else its recorded
    ``base_model_name_or_path`` where that is a directory or a model Relay prepares (the built-in SmolLM2's hub
    name), else the ``model.path`` of the run the adapter was saved in (``<run>/checkpoints/step_N/hf``)."""
    from relay.models.paths import local_model_dir

    adapter_dir = Path(adapter_dir)
    if base_model_dir is not None:
        base = Path(base_model_dir).expanduser()
        if not (base / "config.json").is_file():
            raise ValueError(f"the base model directory {base} has no config.json")
        return base
    recorded = json.loads((adapter_dir / ADAPTER_CONFIG).read_text())["base_model_name_or_path"]
    base = local_model_dir(recorded) or _run_model_dir(adapter_dir)
    if base is None:
        raise ValueError(
            f"{adapter_dir}: its base model {recorded!r} is not on this machine; pass the base model's directory "
            "(relay.checkpoint.export --base DIR)"
        )
    return base


def _run_model_dir(adapter_dir: Path) -> Path | None:
    """``model.path`` of the run whose checkpoint holds ``adapter_dir`` (``<run>/checkpoints/step_N/hf``)."""
    import yaml

    from relay.models.paths import local_model_dir

    config = adapter_dir.resolve().parent.parent.parent / "config.yaml"
    if not config.is_file():
        return None
    model_path = ((yaml.safe_load(config.read_text()) or {}).get("model") or {}).get("path")
    return local_model_dir(str(model_path)) if model_path else None


def merge_adapter_dir(adapter_dir: Path | str, base_model_dir: Path | str | None = None) -> Path:
    """A temporary HF directory: the base model (:func:`adapter_base_dir`) with the adapter merged in. The caller
    removes it when done."""
    adapter_dir = Path(adapter_dir)
    config = json.loads((adapter_dir / ADAPTER_CONFIG).read_text())
    base = adapter_base_dir(adapter_dir, base_model_dir)
    weight_files = sorted(base.glob("*.safetensors"))
    if len(weight_files) != 1:
        raise ValueError(f"{base}: merging an adapter needs one model.safetensors, found {len(weight_files)}")
    out = Path(tempfile.mkdtemp(prefix="relay-merged-"))
    for item in base.iterdir():
        if item.is_file() and item.suffix != ".safetensors" and item.name != "model.safetensors.index.json":
            shutil.copy2(item, out / item.name)
    scaling = float(config["lora_alpha"]) / float(config["r"])
    merged = merged_tensors(load_file(str(weight_files[0])), load_file(str(adapter_dir / ADAPTER_WEIGHTS)), scaling)
    save_file(merged, str(out / "model.safetensors"), {"format": "pt"})
    return out
