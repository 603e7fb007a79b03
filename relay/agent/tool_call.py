"""The tool-call format the policy writes and the tool-result format it reads back.

A call is one ``<tool_call>...</tool_call>`` span; generation stops at its closing tag. Its body is either the
short form ``name: argument`` (what a small model learns from one example in its prompt) or the JSON form that
instruct models such as Qwen2.5 were trained on, ``{"name": ..., "arguments": {...}}`` (the first string value of
``arguments`` is the argument)::

    <tool_call>calculator: 48 / 2</tool_call>
    <tool_call>{"name": "calculator", "arguments": {"expression": "48 / 2"}}</tool_call>

The result is appended as ``<tool_result>24</tool_result>``; the model's next turn continues after it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
RESULT_OPEN = "<tool_result>"
RESULT_CLOSE = "</tool_result>"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class ParsedCall:
    """A turn's tool call: ``name`` and ``argument``, or ``error`` (why the span is not a call) with both empty."""

    name: str = ""
    argument: str = ""
    error: str = ""


def parse_tool_call(turn_text: str) -> ParsedCall:
    """The call that ends ``turn_text`` (the text of a model turn that stopped at :data:`CALL_CLOSE`).

    Examples: ``"so <tool_call>calculator: 3*4</tool_call>"`` -> ``ParsedCall("calculator", "3*4")``;
    ``"<tool_call>3*4</tool_call>"`` -> an error naming the expected ``name: argument`` form.
    """
    end = turn_text.rfind(CALL_CLOSE)
    start = turn_text.rfind(CALL_OPEN, 0, end if end >= 0 else None)
    if end < 0 or start < 0:
        return ParsedCall(error=f"no {CALL_OPEN}...{CALL_CLOSE} span")
    body = turn_text[start + len(CALL_OPEN) : end].strip()
    if body.startswith("{"):
        return _parse_json(body)
    name, sep, argument = body.partition(":")
    name = name.strip()
    if not sep or not _NAME.match(name):
        return ParsedCall(error=f"malformed tool call {body[:60]!r}: write {CALL_OPEN}name: argument{CALL_CLOSE}")
    return ParsedCall(name, argument.strip())


def _parse_json(body: str) -> ParsedCall:
    """The JSON form: ``{"name": str, "arguments": {..} | str}``."""
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as exc:
        return ParsedCall(error=f"malformed JSON tool call ({exc.msg} at character {exc.pos})")
    name = obj.get("name") if isinstance(obj, dict) else None
    if not isinstance(name, str) or not _NAME.match(name):
        return ParsedCall(error='a JSON tool call needs "name": a tool name')
    arguments = obj.get("arguments", "")
    if isinstance(arguments, dict):
        arguments = next((v for v in arguments.values() if isinstance(v, str)), "")
    if not isinstance(arguments, str):
        return ParsedCall(error='a JSON tool call\'s "arguments" must be a string or an object of strings')
    return ParsedCall(name, arguments.strip())


def result_text(text: str) -> str:
    """The text appended after a call: ``<tool_result>text</tool_result>``."""
    return f"{RESULT_OPEN}{text}{RESULT_CLOSE}"


def calls_in(response_text: str) -> list[ParsedCall]:
    """Every ``<tool_call>...</tool_call>`` span of a whole response, parsed as the agent loop parsed it.

    Example: ``"a <tool_call>calculator: 2+2</tool_call><tool_result>4</tool_result> b <tool_call>2*3</tool_call>"``
    -> ``[ParsedCall("calculator", "2+2"), ParsedCall(error="malformed tool call ...")]``.
    """
    calls, start = [], response_text.find(CALL_OPEN)
    while start >= 0:
        end = response_text.find(CALL_CLOSE, start)
        if end < 0:  # an unclosed span at the end of a cut response: not a call the loop ran
            break
        calls.append(parse_tool_call(response_text[start : end + len(CALL_CLOSE)]))
        start = response_text.find(CALL_OPEN, end)
    return calls
