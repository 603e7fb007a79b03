"""Copy a trained policy out of a run: the HF model, or a LoRA run's PEFT adapter (merged into its base on request).

    python -m relay.checkpoint.export outputs/<run> --out DIR [--merge] [--base BASE_DIR]

``outputs/<run>`` is a run directory (its newest checkpoint) or one checkpoint (``outputs/<run>/checkpoints/
step_NNNNNN``). A full fine-tuning run's ``hf/`` export is copied as it is: a model directory transformers and vLLM
load. A LoRA run's is a PEFT adapter (``adapter_config.json``, ``adapter_model.safetensors``), copied as it is, or
with ``--merge`` merged into its base model (``W + (alpha / r) B A``): a plain model directory. The base is found
from the adapter's ``base_model_name_or_path``, else the run's ``model.path``; ``--base`` names it otherwise.
``DIR`` must not exist yet. A bad path exits with code 2 and one line saying what was expected.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from relay.checkpoint.peft_export import is_adapter_dir, merge_adapter_dir
from relay.checkpoint.store import STEP_DIR, latest_checkpoint

HF_DIR = "hf"


class ExportError(ValueError):
    """A path the export cannot use; the message is meant for the user as is."""


def checkpoint_export_dir(target: Path) -> Path:
    """The ``hf/`` directory of ``target``: a checkpoint, or a run directory's newest checkpoint.

    Worked example: ``outputs/r`` holding ``checkpoints/step_000002`` and ``checkpoints/step_000004`` ->
    ``outputs/r/checkpoints/step_000004/hf``.
    """
    if STEP_DIR.match(target.name) and target.parent.name == "checkpoints":
        checkpoint = target
    elif target.is_dir():
        checkpoint = latest_checkpoint(target)
        if checkpoint is None:
            raise ExportError(f"{target}: no checkpoints/step_NNNNNN there; expected a run directory or a checkpoint")
    else:
        raise ExportError(f"{target}: no such run directory or checkpoint")
    export = checkpoint / HF_DIR
    if not export.is_dir():
        raise ExportError(f"{checkpoint} has no {HF_DIR}/ export (the run had trainer.export_hf=false)")
    return export


def export(target: Path, out: Path, merge: bool = False, base: Path | None = None) -> Path:
    """Copy the policy of ``target`` to ``out`` (see the module docstring); returns ``out``."""
    if out.exists():
        raise ExportError(f"--out {out} exists; give a new directory")
    source = checkpoint_export_dir(target)
    adapter = is_adapter_dir(source)
    if merge and not adapter:
        raise ExportError(f"--merge: {source} is a full model, not a LoRA adapter; export it without --merge")
    if not merge:
        shutil.copytree(source, out)
        return out
    try:
        merged = merge_adapter_dir(source, base)
    except ValueError as exc:
        raise ExportError(str(exc)) from None
    shutil.move(str(merged), str(out))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", type=Path, help="a run directory (its newest checkpoint) or one checkpoint")
    parser.add_argument("--out", type=Path, required=True, help="the new directory to write")
    parser.add_argument("--merge", action="store_true", help="merge a LoRA adapter into its base model")
    parser.add_argument("--base", type=Path, default=None, help="the LoRA base model's directory (with --merge)")
    args = parser.parse_args(argv)
    try:
        out = export(args.target, args.out, args.merge, args.base)
    except ExportError as exc:
        print(f"export: {exc}", file=sys.stderr)
        return 2
    kind = "merged model" if args.merge else "PEFT adapter" if is_adapter_dir(out) else "model"
    print(f"{kind}: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
