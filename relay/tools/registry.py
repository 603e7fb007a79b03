"""The tool registry: tool names, the call and result types, and ``run_tool``, which never raises.

A tool is a function ``(argument: str, limits: ToolLimits) -> str``: it returns the text the model reads, or
raises ``ToolError`` (``ToolTimeout`` for a time limit) with a message the model reads after ``error: ``.
Adding a tool is exactly two steps: write such a function, and add one entry ``"name": function`` to
``TOOLS`` below. ``run_tool`` supplies everything else every tool needs: the input-length check, the
wall-clock measurement, the output cut, and turning any failure into an error result.

Result texts, by status:

- ``ok``: the tool's text, cut to ``max_output_chars`` followed by ``OUTPUT_CUT_MARKER`` when longer;
- ``error``: one line ``error: <message>`` (an unknown name lists the available tools);
- ``timeout``: one line ``error: <message>`` saying which limit was hit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from relay.tools import ToolError, ToolLimits, ToolTimeout
from relay.tools.calculator import calculate
from relay.tools.python_sandbox import run_python

__all__ = [
    "OUTPUT_CUT_MARKER",
    "TOOLS",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolLimits",
    "ToolResult",
    "ToolTimeout",
    "check_tool_names",
    "cut_output",
    "run_tool",
]

logger = logging.getLogger(__name__)

Tool = Callable[[str, ToolLimits], str]

TOOLS: dict[str, Tool] = {
    "calculator": calculate,
    "python": run_python,
}

# Appended (after a newline) to an ok result longer than max_output_chars; {limit} is that limit.
OUTPUT_CUT_MARKER = "[output cut: showing the first {limit} characters]"


@dataclass(frozen=True)
class ToolCall:
    name: str  # e.g. "calculator"
    argument: str  # the text inside the call: an expression, or Python code


@dataclass(frozen=True)
class ToolResult:
    text: str  # what the model will read ("error: ..." on error or timeout)
    status: str  # "ok" | "error" | "timeout"
    seconds: float  # wall time of the call


def cut_output(text: str, limit: int) -> str:
    """``text`` when it has at most ``limit`` characters, else its first ``limit`` and the cut marker."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n{OUTPUT_CUT_MARKER.format(limit=limit)}"


def _error_text(message: str, limit: int) -> str:
    """One line ``error: <message>``; a message longer than ``limit`` characters is cut with ``...``."""
    line = " ".join(str(message).split()) or "unknown error"
    text = f"error: {line}"
    return text if len(text) <= limit else text[: max(limit - 3, len("error: "))] + "..."


def _available(tools: Mapping[str, Tool]) -> str:
    return ", ".join(sorted(tools)) or "(none)"


def check_tool_names(names: Iterable[str], tools: Mapping[str, Tool] = TOOLS) -> None:
    """Raise ValueError naming every name in ``names`` that ``tools`` lacks, and the available ones."""
    unknown = [name for name in names if name not in tools]
    if unknown:
        listed = ", ".join(repr(name) for name in unknown)
        raise ValueError(f"unknown tool name(s) {listed}; available tools: {_available(tools)}")


def _invoke(call: ToolCall, limits: ToolLimits, tools: Mapping[str, Tool]) -> tuple[str, str]:
    """``(status, text)`` of one call, before the output cut; never raises."""
    tool = tools.get(call.name)
    if tool is None:
        return "error", f"unknown tool {call.name!r}; available tools: {_available(tools)}"
    if len(call.argument) > limits.max_input_chars:
        return "error", f"input is {len(call.argument)} characters; the limit is {limits.max_input_chars}"
    try:
        return "ok", tool(call.argument, limits)
    except ToolTimeout as exc:
        return "timeout", str(exc) or "time limit exceeded"
    except ToolError as exc:
        return "error", str(exc) or type(exc).__name__
    except Exception as exc:  # a bug in a tool must not end the rollout: the model gets an error result
        logger.exception("tool %r failed unexpectedly", call.name)
        return "error", f"internal error in tool {call.name!r}: {type(exc).__name__}: {exc}"


def run_tool(call: ToolCall, limits: ToolLimits, tools: Mapping[str, Tool] = TOOLS) -> ToolResult:
    """Run ``call`` with ``tools[call.name]``. Never raises: an unknown name (the text lists the available
    tools), an input over ``limits.max_input_chars``, a ``ToolError``, a ``ToolTimeout`` or any unexpected
    exception becomes a result with status ``error`` or ``timeout`` and a one-line ``error: ...`` text."""
    start = time.perf_counter()
    status, text = _invoke(call, limits, tools)
    limit = limits.max_output_chars
    text = cut_output(text, limit) if status == "ok" else _error_text(text, limit)
    return ToolResult(text=text, status=status, seconds=time.perf_counter() - start)
