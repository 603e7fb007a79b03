"""Write the policy as an HF checkpoint directory any tool can load (transformers, vLLM, lm-eval)."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

# Weights come from the learner; everything else (config, tokenizer, chat template) from the base model.
_WEIGHT_FILES = ("*.safetensors", "*.safetensors.index.json", "*.bin", "*.pt", "*.gguf")


def export_hf_checkpoint(out_dir: Path, weights: Mapping[str, np.ndarray], base_model_dir: Path) -> Path:
    """``out_dir`` gets ``model.safetensors`` (``weights``, HF names) and the base model's other files.

    The export is one float32 file (the learner's master weights) whatever the base's layout: a base shipped as
    bfloat16 shards with an index (Qwen2.5) gets neither its shards nor its index copied. Its ``config.json`` is the
    base's, ``dtype`` included, so a loader left at ``dtype="auto"`` (transformers, vLLM) casts the float32 weights
    to the base's dtype, as it would the base; ``dtype=torch.float32`` keeps them as trained. A tied model's weights
    have no ``lm_head.weight`` (its config says ``tie_word_embeddings``), exactly like the base checkpoint.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    skip = {p.name for pattern in _WEIGHT_FILES for p in Path(base_model_dir).glob(pattern)}
    for item in Path(base_model_dir).iterdir():
        if item.is_file() and item.name not in skip:
            shutil.copy2(item, out_dir / item.name)
    arrays = {k: np.array(v, order="C") for k, v in weights.items()}
    save_file(arrays, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return out_dir
