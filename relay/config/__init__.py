"""Relay's config: schema, loading (presets, environment, overrides), derivation and validation."""

from relay.config.derive import Derived
from relay.config.load import ConfigError, LoadedConfig, load_config, print_warnings, typed_section
from relay.config.schema import RelayConfig
from relay.config.validate import unsupported

__all__ = [
    "ConfigError",
    "Derived",
    "LoadedConfig",
    "RelayConfig",
    "load_config",
    "print_warnings",
    "typed_section",
    "unsupported",
]
