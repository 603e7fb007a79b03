"""Build a validated config from schema defaults, a YAML preset chain, environment variables and ``--set``.

Precedence: schema default < preset (and the presets it ``extends``) < environment < ``--set``; a setting with two
spellings follows it too (``relay.config.aliases``: the higher source's spelling wins).
Every error is a :class:`ConfigError` naming the key path, the bad value and a fix, raised before
any Ray actor or accelerator starts. The result carries a computed ``derived:`` block and, per leaf
key, where its value came from (``sources``, shown by ``--explain``).
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException, ValidationError

from relay.config.aliases import resolve_aliases
from relay.config.derive import Derived, derive
from relay.config.on_cpu import ON_CPU_SOURCE, on_cpu_layer, on_cpu_settings
from relay.config.schema import CONFIG_VERSION, RelayConfig
from relay.config.sources import LEGACY_KEYS, EnvOverride, env_overrides
from relay.config.validate import validate

EXTENDS_KEY = "extends"
DEFAULT_SOURCE = "default"


class ConfigError(ValueError):
    """A config the run cannot use; the message is meant for the user as is."""


@dataclass
class LoadedConfig:
    """The merged, validated config plus what was derived from it and where each value came from."""

    cfg: DictConfig
    derived: Derived
    sources: dict[str, str]
    warnings: list[str] = field(default_factory=list)
    env_overrides: list[EnvOverride] = field(default_factory=list)  # applied, shown in the run header

    def to_yaml(self) -> str:
        return OmegaConf.to_yaml(self.cfg) + yaml.safe_dump({"derived": self.derived.as_dict()}, sort_keys=False)

    def explain(self) -> str:
        """One line per leaf key: ``key: value  # source``."""
        flat = _flatten(OmegaConf.to_container(self.cfg, resolve=True))
        width = max(len(f"{k}: {v!r}") for k, v in flat.items())
        lines = [f"{f'{k}: {v!r}'.ljust(width)}  # {self.sources.get(k, DEFAULT_SOURCE)}" for k, v in flat.items()]
        lines += [f"{f'derived.{k}: {v!r}'.ljust(width)}  # derived" for k, v in self.derived.as_dict().items()]
        return "\n".join(lines) + "\n"

    def explain_key(self, key: str) -> str:
        """The reference entry of ``key`` (docs/configuration.md), its value here and where that came from; for a
        section, of every key under it. An unknown key is a :class:`ConfigError` with the nearest key."""
        from relay.config.reference import key_docs

        docs = key_docs()
        keys = [k for k in docs if k == key or k.startswith(f"{key}.")]
        if not keys:
            raise _unknown_key_error(key, "--explain")
        flat = _flatten(OmegaConf.to_container(self.cfg, resolve=True))
        entries = []
        for k in keys:
            here = f"value: {flat[k]!r}  # {self.sources.get(k, DEFAULT_SOURCE)}\n" if k in flat else ""
            entries.append(docs[k].text() + here)
        return "\n".join(entries)


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, Mapping) and node:
        out: dict[str, Any] = {}
        for k, v in node.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: node}


def _schema_keys() -> list[str]:
    return list(_flatten(OmegaConf.to_container(OmegaConf.structured(RelayConfig))))


def _unknown_key_error(bad_path: str, source: str) -> ConfigError:
    known = _schema_keys()
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
    return [*chain, (f"preset {_short(path)}", data)]


def _short(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _dotlist_layer(item: str, source: str) -> dict:
    """``key=value`` (value parsed as YAML) as a nested dict; a value that is not YAML is a ConfigError."""
    try:
        return OmegaConf.to_container(OmegaConf.from_dotlist([item]))
    except yaml.YAMLError as exc:
        key, _, value = item.partition("=")
        problem = str(exc).splitlines()[0]
        raise ConfigError(
            f"{source}: {key}={value!r} is not a YAML value ({problem}); quote it, e.g. {key}='\"...\"' "
            "(a value starting with { or [ is read as a mapping or list)"
        ) from None


def _env_layers(overrides: Sequence[EnvOverride]) -> list[tuple[str, dict]]:
    return [(f"env {o.var}", _dotlist_layer(f"{o.key}={o.value}", f"env {o.var}")) for o in overrides]


def _set_layers(overrides: Sequence[str]) -> list[tuple[str, dict]]:
    layers = []
    for item in overrides:
        if "=" not in item or item.startswith("="):
            raise ConfigError(f"--set {item!r}: expected key=value, e.g. --set rollout.n=8")
        layers.append((f"--set {item}", _dotlist_layer(item, f"--set {item}")))
    return layers


def _check_layer_keys(data: dict, source: str) -> None:
    for key in _flatten(data):
        for legacy, fix in LEGACY_KEYS.items():
            if key == legacy or key.startswith(legacy + "."):
                raise ConfigError(f"'{legacy}' (from {source}) is no longer a config key: {fix}")
        if key == "derived" or key.startswith("derived."):
            raise ConfigError(f"'{key}' (from {source}) is computed, not set: change the inputs it is derived from")


def _merge(cfg: DictConfig, data: dict, source: str) -> DictConfig:
    _check_layer_keys(data, source)
    try:
        return OmegaConf.merge(cfg, data)
    except ConfigKeyError as exc:
        raise _unknown_key_error(str(exc.full_key), source) from None
    except ValidationError as exc:
        raise ConfigError(f"{exc.full_key}: wrong type (from {source}): {exc.msg.splitlines()[0]}") from None
    except OmegaConfBaseException as exc:
        raise ConfigError(f"{getattr(exc, 'full_key', '?')}: {exc.msg.splitlines()[0]} (from {source})") from None


def load_config(
    preset: str | Path | None = None,
    overrides: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> LoadedConfig:
    """Merge the layers, derive, validate; the returned ``cfg`` is read-only."""
    cfg = OmegaConf.structured(RelayConfig)
    layers: list[tuple[str, dict]] = []
    if preset is not None:
        layers.extend(_read_preset(Path(preset)))
    presets = len(layers)
    from_env = env_overrides(os.environ if environ is None else environ)
    layers.extend(_env_layers(from_env))
    layers.extend(_set_layers(overrides))
    sources: dict[str, str] = {}
    for source, data in layers:
        cfg = _merge(cfg, data, source)
        sources.update({key: source for key in _flatten(data)})
    if cfg.config_version != CONFIG_VERSION:
        raise ConfigError(
            f"config_version={cfg.config_version} but this Relay reads version {CONFIG_VERSION}; "
            "update the preset to the current schema"
        )
    preset_sources = [source for source, _ in layers[:presets]]
    problems = resolve_aliases(cfg, sources, preset_sources)
    if problems:
        raise ConfigError("invalid config:\n  " + "\n  ".join(problems))
    if cfg.placement.on_cpu:  # after every layer: the preset's devices are what it replaces
        cfg = _merge(cfg, on_cpu_layer(), ON_CPU_SOURCE)
        sources.update({key: ON_CPU_SOURCE for key in on_cpu_settings()})
    problems = validate(cfg)
    derived, derive_problems, warnings = derive(cfg)
    problems += derive_problems
    if problems:
        raise ConfigError("invalid config:\n  " + "\n  ".join(problems))
    OmegaConf.set_readonly(cfg, True)
    return LoadedConfig(cfg, derived, sources, warnings, from_env)


def print_warnings(loaded: LoadedConfig) -> None:
    for w in loaded.warnings:
        print(f"config warning: {w}", file=sys.stderr)


def typed_section(schema: type, values: Mapping[str, Any]) -> Any:
    """``values`` (a plain mapping of one section) as an instance of the section's dataclass ``schema``, its missing
    keys the defaults: what a role's typed settings are built from outside a loaded config (tests, in-process
    roles)."""
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), dict(values)))
