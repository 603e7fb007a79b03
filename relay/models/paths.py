"""Resolve ``model.path``: a checkpoint directory, or a name of a model Relay prepares itself."""

from __future__ import annotations

from pathlib import Path

from relay.models.prepare_smollm2 import default_model_dir

PREPARED_MODELS = {"smollm2-135m": default_model_dir}


class ModelPathError(ValueError):
    pass


def resolve_model_path(path: str) -> Path:
    """The checkpoint directory for ``path``; raises with the fix when it is not there."""
    if path in PREPARED_MODELS:
        resolved = PREPARED_MODELS[path]()
        if not (resolved / "config.json").is_file():
            raise ModelPathError(
                f"model.path={path!r}: the converted checkpoint {resolved} is missing; "
                "run scripts/setup.sh (or `python -m relay.models.prepare_smollm2`)"
            )
        return resolved
    resolved = Path(path).expanduser()
    if not (resolved / "config.json").is_file():
        raise ModelPathError(
            f"model.path={path!r}: no config.json there; give an HF checkpoint directory "
            f"or one of {sorted(PREPARED_MODELS)}"
        )
    return resolved
