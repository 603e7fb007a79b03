"""Build a validated :class:`RelayConfig` from schema defaults, a YAML preset and ``--set`` overrides.

Precedence: schema default < preset (and the presets it ``extends``) < ``--set key=value``.
Every error is a :class:`ConfigError` that names the key path, the bad value and a fix, raised
before any Ray actor or accelerator starts.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException, ValidationError

from relay.config.schema import CONFIG_VERSION, RelayConfig
from relay.config.validate import validate

EXTENDS_KEY = "extends"


class ConfigError(ValueError):
    """A config the run cannot use; the message is meant for the user as is."""


def _all_keys(node: Any, prefix: str = "") -> list[str]:
    keys = []
    if isinstance(node, DictConfig):
        for k in node:
            path = f"{prefix}.{k}" if prefix else str(k)
            keys.append(path)
            keys.extend(_all_keys(node._get_node(k), path))
    return keys


def _unknown_key_error(bad_path: str, source: str) -> ConfigError:
    schema = OmegaConf.structured(RelayConfig)
    known = _all_keys(schema)
    close = difflib.get_close_matches(bad_path, known, n=1, cutoff=0.6)
    hint = f"; did you mean '{close[0]}'?" if close else "; see `python trainer.py --print-config`"
    return ConfigError(f"unknown config key '{bad_path}' (from {source}){hint}")


def _read_preset(path: Path, seen: tuple[Path, ...] = ()) -> list[tuple[str, dict]]:
    """The preset chain, base first: ``[(source, mapping), ...]``."""
    path = path.resolve()
    if path in seen:
        raise ConfigError(f"{path}: '{EXTENDS_KEY}' loops back to itself ({' -> '.join(map(str, seen))})")
    if not path.is_file():
        raise ConfigError(f"config file not found: {path} (presets live in configs/)")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    chain: list[tuple[str, dict]] = []
    base = data.pop(EXTENDS_KEY, None)
    if base is not None:
        chain = _read_preset(path.parent / str(base), (*seen, path))
    return [*chain, (str(path), data)]


def _merge(cfg: DictConfig, data: Any, source: str) -> DictConfig:
    try:
        return OmegaConf.merge(cfg, data)
    except ConfigKeyError as exc:
        raise _unknown_key_error(str(exc.full_key), source) from None
    except ValidationError as exc:
        raise ConfigError(f"{exc.full_key}: wrong type (from {source}): {exc.msg.splitlines()[0]}") from None
    except OmegaConfBaseException as exc:
        raise ConfigError(
            f"{getattr(exc, 'full_key', '?')}: {exc.msg.splitlines()[0]} (from {source})"
        ) from None


def _parse_overrides(overrides: Sequence[str]) -> list[tuple[str, DictConfig]]:
    parsed = []
    for item in overrides:
        if "=" not in item or item.startswith("="):
            raise ConfigError(f"--set {item!r}: expected key=value, e.g. --set rollout.n=8")
        parsed.append((f"--set {item}", OmegaConf.from_dotlist([item])))
    return parsed


def load_config(preset: str | Path | None = None, overrides: Sequence[str] = ()) -> DictConfig:
    """Merge defaults, preset chain and overrides, then validate; returns a read-only typed config."""
    cfg = OmegaConf.structured(RelayConfig)
    layers: list[tuple[str, Any]] = []
    if preset is not None:
        layers.extend(_read_preset(Path(preset)))
    layers.extend(_parse_overrides(overrides))
    for source, data in layers:
        cfg = _merge(cfg, data, source)
    if cfg.config_version != CONFIG_VERSION:
        raise ConfigError(
            f"config_version={cfg.config_version} but this Relay reads version {CONFIG_VERSION}; "
            "update the preset to the current schema"
        )
    problems = validate(cfg)
    if problems:
        raise ConfigError("invalid config:\n  " + "\n  ".join(problems))
    OmegaConf.set_readonly(cfg, True)
    return cfg


def to_yaml(cfg: DictConfig) -> str:
    return OmegaConf.to_yaml(cfg)
