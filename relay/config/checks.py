"""The range checks every config validation module uses: each appends to a list of problems one that names the
key, the value and what is allowed.

Example: ``choice(p, "rollout.engine", "tgi", ("hf", "vllm"))`` appends ``"rollout.engine='tgi': must be one of hf,
vllm"``.
"""

from __future__ import annotations

from typing import Any


def choice(problems: list[str], key: str, value: Any, allowed: tuple) -> None:
    """``value`` must be one of ``allowed``."""
    if value not in allowed:
        problems.append(f"{key}={value!r}: must be one of {', '.join(map(str, allowed))}")


def at_least(problems: list[str], key: str, value: float | None, low: float) -> None:
    """``value`` must be ``>= low`` (None passes: an unset optional setting)."""
    if value is not None and value < low:
        problems.append(f"{key}={value}: must be >= {low}")


def positive(problems: list[str], key: str, value: float) -> None:
    """``value`` must be ``> 0``."""
    if value <= 0:
        problems.append(f"{key}={value}: must be > 0")
