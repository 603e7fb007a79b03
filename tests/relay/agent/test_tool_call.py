"""The call format: the short and the JSON form, and what a malformed call is told."""

from __future__ import annotations

import pytest

from relay.agent.tool_call import ParsedCall, parse_tool_call, result_text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("So <tool_call>calculator: 48 / 2</tool_call>", ParsedCall("calculator", "48 / 2")),
        ("<tool_call> python :print(1)\nprint(2) </tool_call>", ParsedCall("python", "print(1)\nprint(2)")),
        (
            '<tool_call>{"name": "calculator", "arguments": {"expression": "3*4"}}</tool_call>',
            ParsedCall("calculator", "3*4"),
        ),
        ('<tool_call>{"name": "python", "arguments": "print(5)"}</tool_call>', ParsedCall("python", "print(5)")),
        # the last call of the turn is the one that stopped it
        ("<tool_call>a: 1</tool_call> then <tool_call>calculator: 2</tool_call>", ParsedCall("calculator", "2")),
    ],
)
def test_calls_parse(text: str, expected: ParsedCall) -> None:
    assert parse_tool_call(text) == expected


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("<tool_call>48 / 2</tool_call>", "name: argument"),
        ("<tool_call>my tool: 1</tool_call>", "name: argument"),
        ("<tool_call>{name: 1}</tool_call>", "malformed JSON"),
        ('<tool_call>{"arguments": {}}</tool_call>', '"name"'),
        ('<tool_call>{"name": "calculator", "arguments": 3}</tool_call>', '"arguments"'),
        ("no call here </tool_call>", "span"),
    ],
)
def test_malformed_calls_are_errors_not_exceptions(text: str, words: str) -> None:
    parsed = parse_tool_call(text)
    assert not parsed.name and words in parsed.error


def test_result_text() -> None:
    assert result_text("24") == "<tool_result>24</tool_result>"


def test_calls_in_a_whole_response() -> None:
    """Each closed span parsed in order; an unclosed span at the end (a cut response) is no call."""
    from relay.agent.tool_call import calls_in

    text = (
        "a <tool_call>calculator: 48/2</tool_call><tool_result>24</tool_result> b "
        "<tool_call>48+24</tool_call><tool_result>error: ...</tool_result> c <tool_call>calculator: 1"
    )
    first, second = calls_in(text)
    assert first == ParsedCall("calculator", "48/2")
    assert second.error.startswith("malformed tool call '48+24'")
    assert calls_in("no call") == []
