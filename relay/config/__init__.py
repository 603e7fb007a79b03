"""Relay's config: schema, loading (presets, overrides) and validation."""

from relay.config.load import ConfigError, load_config, to_yaml
from relay.config.schema import RelayConfig

__all__ = ["ConfigError", "RelayConfig", "load_config", "to_yaml"]
