"""Tools a policy model calls during a multi-turn rollout: a calculator and a sandboxed Python interpreter.

``registry`` maps tool names to functions and turns any call into a ``ToolResult`` (``run_tool``);
``calculator`` evaluates arithmetic from a whitelisted expression tree; ``python_sandbox`` runs code in a
limited child process (``sandbox_prelude`` is the script that child runs first).

The three types every tool shares are defined here rather than in ``registry``: the tools raise
``ToolError`` and read ``ToolLimits``, and the registry imports the tools, so defining them in the registry
would make each tool module and the registry import each other. ``registry`` re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolLimits:
    """What one tool call may use. ``cpu_seconds`` and ``memory_mb`` bind the Python tool's child process
    (``RLIMIT_CPU``, with one-second granularity, and ``RLIMIT_AS``); the others bind every tool. These defaults are
    the ``tools`` config section's (:class:`relay.config.agent_schema.ToolsConfig` reads them from here)."""

    timeout_s: float = 5.0  # wall clock per call
    cpu_seconds: float = 2.0  # python: RLIMIT_CPU
    memory_mb: int = 256  # python: address-space limit
    max_output_chars: int = 500  # what the model gets back; longer output is cut, with a marker saying so
    max_input_chars: int = 2000  # longer calls are refused with an error result

    def __post_init__(self) -> None:
        for name in ("timeout_s", "cpu_seconds", "memory_mb", "max_output_chars", "max_input_chars"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ToolLimits.{name} must be positive, got {getattr(self, name)!r}")


class ToolError(Exception):
    """A tool's own refusal (a bad expression, division by zero, a program that raised): the message becomes
    the text the model reads after ``error: ``."""


class ToolTimeout(ToolError):
    """The call ran past its wall-clock or CPU-time limit."""
