"""Loading a config with no environment variables, and reading what ``load_config`` refuses."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from relay.config import ConfigError, load_config

NO_ENV: dict[str, str] = {}


def assert_refused(overrides: Sequence[str], message: str) -> None:
    """``load_config`` with ``overrides`` raises a :class:`ConfigError` that matches the regex ``message``."""
    with pytest.raises(ConfigError, match=message):
        load_config(overrides=list(overrides), environ=NO_ENV)


def refusal_lines(overrides: Sequence[str]) -> list[str]:
    """The lines, stripped, of the :class:`ConfigError` that ``load_config`` raises for ``overrides``."""
    with pytest.raises(ConfigError) as refused:
        load_config(overrides=list(overrides), environ=NO_ENV)
    return [line.strip() for line in str(refused.value).splitlines()]
