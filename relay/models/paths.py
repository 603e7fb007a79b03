"""Resolve ``model.path``: a checkpoint directory, or a name of a model Relay prepares itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from relay.models.checkpoint_files import CheckpointFileError, check_checkpoint
from relay.models.prepare_smollm2 import HUB_NAME, default_model_dir

PREPARED_MODELS = {"smollm2-135m": default_model_dir}
# The hub name each prepared model was converted from: what a LoRA adapter records as its base.
PREPARED_HUB_NAMES = {"smollm2-135m": HUB_NAME}


class ModelPathError(ValueError):
    pass


def resolve_model_path(path: str, key: str = "model.path") -> Path:
    """The checkpoint directory for ``path`` (the value of config ``key``); raises with the fix when it is
    not there."""
    if path in PREPARED_MODELS:
        resolved = PREPARED_MODELS[path]()
        if not (resolved / "config.json").is_file():
            raise ModelPathError(
                f"{key}={path!r}: the converted checkpoint {resolved} is missing; "
                "run scripts/setup.sh (or `python -m relay.models.prepare_smollm2`)"
            )
        return resolved
    resolved = Path(path).expanduser().resolve()  # absolute: the roles' working directories are not the driver's
    if not (resolved / "config.json").is_file():
        raise ModelPathError(
            f"{key}={path!r}: no config.json there; give an HF checkpoint directory or one of {sorted(PREPARED_MODELS)}"
        )
    return resolved


def reward_model_dir(cfg: Any) -> Path:
    """The reward model's checkpoint directory (``reward_model.path``: a directory or a prepared name)."""
    return resolve_model_path(str(cfg.reward_model.path), "reward_model.path")


def check_model_files(model_dir: Path, key: str = "model.path") -> None:
    """The policy checkpoint's weight files checked against its config.json (headers only,
    :func:`relay.models.checkpoint_files.check_checkpoint`): a shard the index names that is missing, a cut-off
    shard or a tensor shape the config does not declare raises :class:`ModelPathError` naming ``key``, the file and
    the mismatch. Not part of :func:`resolve_model_path`: the memory estimate resolves config-only directories."""
    try:
        check_checkpoint(model_dir)
    except CheckpointFileError as exc:
        raise ModelPathError(f"{key}={str(model_dir)!r}: {exc}") from None


def check_model_family(model_dir: Path, key: str = "model.path") -> None:
    """The checkpoint's ``config.json`` is a family and options the JAX learner implements
    (:class:`relay.models.llama_config.LlamaConfig`); otherwise :class:`ModelPathError` naming ``key``, the config
    key, its value and what is supported, before any role starts."""
    from relay.models.llama_config import LlamaConfig, ModelConfigError

    try:
        LlamaConfig.from_pretrained(model_dir)
    except ModelConfigError as exc:
        raise ModelPathError(
            f"{key}={str(model_dir)!r}: {exc}; point {key} at a checkpoint of a supported family "
            "(docs/getting-started.md#models)"
        ) from None


def solver_model_path(cfg: Any, policy_path: str | Path) -> Path:
    """The solver of ``reward.mode=solver``: ``reward.solver_model``, or the base policy when it is null."""
    if cfg.reward.solver_model:
        return resolve_model_path(cfg.reward.solver_model, key="reward.solver_model")
    return Path(policy_path)


def portable_model_name(model_dir: Path | str) -> str:
    """The name a LoRA adapter records as its base (PEFT's ``base_model_name_or_path``), valid on other machines.

    The built-in SmolLM2 is its hub name; another directory is the name its ``config.json`` was saved from
    (``_name_or_path``) when that is a hub-style name, else the directory's own name. Worked examples:
    ``~/.cache/relay/models/SmolLM2-135M-Instruct`` -> ``HuggingFaceTB/SmolLM2-135M-Instruct``;
    ``/ckpt/qwen`` whose config says ``Qwen/Qwen2.5-3B-Instruct`` -> that; ``/ckpt/my-model`` -> ``my-model``.
    """
    import json

    model_dir = Path(model_dir).expanduser().resolve()
    for name, locate in PREPARED_MODELS.items():
        if locate().expanduser().resolve() == model_dir:
            return PREPARED_HUB_NAMES[name]
    try:
        saved_from = json.loads((model_dir / "config.json").read_text()).get("_name_or_path") or ""
    except (OSError, ValueError):
        saved_from = ""
    if saved_from.count("/") == 1 and not saved_from.startswith((".", "/", "~")):
        return saved_from
    return model_dir.name


def local_model_dir(name: str) -> Path | None:
    """Where ``name`` (a directory, a prepared model's name or its hub name) is on this machine; None if nowhere."""
    prepared = {hub_name: short for short, hub_name in PREPARED_HUB_NAMES.items()}
    try:
        return resolve_model_path(prepared.get(name, name))
    except ModelPathError:
        return None
