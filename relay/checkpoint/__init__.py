"""Checkpoints: atomic step directories, pytrees as safetensors + a JSON sidecar, HF-format export."""

from relay.checkpoint.hf_export import export_hf_checkpoint
from relay.checkpoint.store import (
    CheckpointError,
    checkpoint_path,
    latest_checkpoint,
    list_checkpoints,
    prune_checkpoints,
    resolve_resume,
    write_atomically,
)
from relay.checkpoint.tree_io import load_tree, save_tree

__all__ = [
    "CheckpointError",
    "checkpoint_path",
    "export_hf_checkpoint",
    "latest_checkpoint",
    "list_checkpoints",
    "load_tree",
    "prune_checkpoints",
    "resolve_resume",
    "save_tree",
    "write_atomically",
]
