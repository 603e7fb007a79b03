"""run_tool never raises and shapes every result; check_tool_names names what is wrong."""

from __future__ import annotations

import logging
import time

import pytest

from relay.tools import ToolError, ToolLimits, ToolTimeout
from relay.tools.calculator import calculate
from relay.tools.python_sandbox import run_python
from relay.tools.registry import (
    OUTPUT_CUT_MARKER,
    TOOLS,
    ToolCall,
    ToolResult,
    check_tool_names,
    cut_output,
    run_tool,
)

LIMITS = ToolLimits(max_output_chars=20, max_input_chars=30)


def _echo(argument: str, limits: ToolLimits) -> str:
    return argument


def _refuse(argument: str, limits: ToolLimits) -> str:
    raise ToolError("no\nthanks")


def _slow(argument: str, limits: ToolLimits) -> str:
    raise ToolTimeout("timed out after 1 s")


def _buggy(argument: str, limits: ToolLimits) -> str:
    return {}[argument]


FAKE_TOOLS = {"echo": _echo, "refuse": _refuse, "slow": _slow, "buggy": _buggy}


def test_the_registry_holds_the_two_tools() -> None:
    assert dict(TOOLS) == {"calculator": calculate, "python": run_python}


def test_ok_result() -> None:
    result = run_tool(ToolCall("echo", "hello"), LIMITS, FAKE_TOOLS)
    assert (result.text, result.status) == ("hello", "ok")
    assert isinstance(result, ToolResult) and 0 <= result.seconds < 1


def test_long_output_is_cut_with_a_marker() -> None:
    result = run_tool(ToolCall("echo", "x" * 25), LIMITS, FAKE_TOOLS)
    assert result.status == "ok"
    assert result.text == "x" * 20 + "\n" + OUTPUT_CUT_MARKER.format(limit=20)
    assert cut_output("x" * 20, 20) == "x" * 20  # at the limit: untouched


def test_long_input_is_refused_without_calling_the_tool() -> None:
    calls = []
    limits = ToolLimits(max_input_chars=30)
    result = run_tool(ToolCall("echo", "y" * 31), limits, {"echo": lambda a, limits: calls.append(a) or a})
    assert result.status == "error"
    assert result.text == "error: input is 31 characters; the limit is 30"
    assert calls == []


def test_unknown_name_lists_the_available_tools() -> None:
    result = run_tool(ToolCall("search", "q"), ToolLimits(), FAKE_TOOLS)
    assert result.status == "error"
    assert result.text == "error: unknown tool 'search'; available tools: buggy, echo, refuse, slow"


def test_tool_error_becomes_one_error_line() -> None:
    result = run_tool(ToolCall("refuse", "a"), LIMITS, FAKE_TOOLS)
    assert (result.text, result.status) == ("error: no thanks", "error")


def test_timeout_status() -> None:
    result = run_tool(ToolCall("slow", "a"), ToolLimits(), FAKE_TOOLS)
    assert (result.text, result.status) == ("error: timed out after 1 s", "timeout")


def test_unexpected_exception_is_an_error_result_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="relay.tools.registry"):
        result = run_tool(ToolCall("buggy", "k"), ToolLimits(), FAKE_TOOLS)
    assert result.status == "error"
    assert result.text == "error: internal error in tool 'buggy': KeyError: 'k'"
    assert "tool 'buggy' failed unexpectedly" in caplog.text


def test_long_error_stays_one_line_within_the_limit() -> None:
    def verbose(argument: str, limits: ToolLimits) -> str:
        raise ToolError("bad " * 50)

    result = run_tool(ToolCall("verbose", ""), LIMITS, {"verbose": verbose})
    assert result.text.startswith("error: bad bad") and result.text.endswith("...")
    assert len(result.text) <= 20 and "\n" not in result.text


def test_calculator_through_the_registry() -> None:
    assert run_tool(ToolCall("calculator", "6 * 7"), ToolLimits()).text == "42"
    refused = run_tool(ToolCall("calculator", "1 / 0"), ToolLimits())
    assert (refused.text, refused.status) == ("error: division by zero", "error")


def test_seconds_measures_the_call() -> None:
    def sleepy(argument: str, limits: ToolLimits) -> str:
        time.sleep(0.05)
        return "done"

    assert run_tool(ToolCall("sleepy", ""), ToolLimits(), {"sleepy": sleepy}).seconds >= 0.05


def test_check_tool_names() -> None:
    check_tool_names(["calculator", "python"])
    with pytest.raises(ValueError, match=r"unknown tool name\(s\) 'search', 'shell'; available tools: calculator, py"):
        check_tool_names(["calculator", "search", "shell"])


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="timeout_s must be positive"):
        ToolLimits(timeout_s=0)
