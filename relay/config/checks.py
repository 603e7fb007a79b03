"""The range checks every config validation module uses: each appends to a list of problems one that names the
key, the value and what is allowed.

Example: ``choice(p, "rollout.engine", "tgi", ("hf", "vllm"))`` appends ``"rollout.engine='tgi': must be one of hf,
vllm"``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# While :func:`recording_rules` is active: (key, rule) for every check made, e.g. ("rollout.engine", "hf | vllm").
_recorded: list[tuple[str, str]] | None = None


@contextmanager
def recording_rules() -> Iterator[list[tuple[str, str]]]:
    """Collect the rule of every check made inside the block: the configuration reference's allowed values come
    from the checks themselves, so the docs cannot disagree with what is refused."""
    global _recorded
    previous, _recorded = _recorded, []
    try:
        yield _recorded
    finally:
        _recorded = previous


def _record(key: str, rule: str) -> None:
    if _recorded is not None:
        _recorded.append((key, rule))


def choice(problems: list[str], key: str, value: Any, allowed: tuple) -> None:
    """``value`` must be one of ``allowed``."""
    _record(key, " | ".join(map(str, allowed)))
    if value not in allowed:
        problems.append(f"{key}={value!r}: must be one of {', '.join(map(str, allowed))}")


def at_least(problems: list[str], key: str, value: float | None, low: float) -> None:
    """``value`` must be ``>= low`` (None passes: an unset optional setting)."""
    _record(key, f">= {low}")
    if value is not None and value < low:
        problems.append(f"{key}={value}: must be >= {low}")


def positive(problems: list[str], key: str, value: float) -> None:
    """``value`` must be ``> 0``."""
    _record(key, "> 0")
    if value <= 0:
        problems.append(f"{key}={value}: must be > 0")
