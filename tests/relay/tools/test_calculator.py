"""The calculator: golden values for each accepted form and each guard."""

from __future__ import annotations

import time

import pytest

from relay.tools import ToolError, ToolLimits
from relay.tools.calculator import MAX_DEPTH, calculate, normalise

LIMITS = ToolLimits()


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2 + 3 * 4", "14"),
        ("(2 + 3) * 4", "20"),
        ("7 // 2", "3"),
        ("-7 // 2", "-4"),
        ("7 % 3", "1"),
        ("2 ** 10", "1024"),
        ("-3 + +5", "2"),
        ("--4", "4"),
        ("48 / 2", "24"),  # an integral float prints as an int
        ("24.0", "24"),
        ("1 / 3", "0.3333333333"),
        ("2 / 3", "0.6666666667"),
        ("0.1 + 0.2", "0.3"),
        ("2.5 * 2", "5"),
        ("1e3", "1000"),
        ("1_000 + 1", "1001"),
        ("1e20", "1e+20"),  # integral but past 1e15: its low digits are not meaningful
        ("2 ** 0.5", "1.414213562"),
        ("2 ** -2", "0.25"),
        ("-0.0", "0"),
        ("2 ** 100", "1267650600228229401496703205376"),  # ints stay exact
        ("12345678901234567890 * 10", "123456789012345678900"),
    ],
)
def test_arithmetic(expression: str, expected: str) -> None:
    assert calculate(expression, LIMITS) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("  12 * 3  ", "36"),
        ("12 * 3 =", "36"),
        ("$12 * 3", "36"),
        ("1,000 + 1", "1001"),
        ("1,000,000 / 1,000", "1000"),
        ("3 × 4", "12"),
        ("12 ÷ 4", "3"),
        ("2^10", "1024"),
        ("5 − 2", "3"),  # U+2212 minus sign
        ("(1 +\n 2)\n", "3"),
    ],
)
def test_lenient_forms(expression: str, expected: str) -> None:
    assert calculate(expression, LIMITS) == expected


def test_normalise_leaves_non_thousands_commas_alone() -> None:
    assert normalise("1,000,000") == "1000000"
    assert normalise("1,23") == "1,23"  # not a thousands group: stays, and is refused as a tuple
    assert normalise("1, 000") == "1, 000"


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("x + 1", "unsupported element Name"),
        ("abs(-1)", "unsupported element Call"),
        ("(1).real", "unsupported element Attribute"),
        ("[1][0]", "unsupported element Subscript"),
        ("1 < 2", "unsupported element Compare"),
        ("'a' * 3", "unsupported element str"),
        ("True + 1", "unsupported element bool"),
        ("1j * 2", "unsupported element complex"),
        ("1,23", "unsupported element Tuple"),
        ("1 << 3", "unsupported element LShift"),
        ("__import__('os')", "unsupported element Call"),
        ("2 +", "not an arithmetic expression"),
        ("", "empty expression"),
        (" = ", "empty expression"),
        ("1 / 0", "division by zero"),
        ("1 // 0.0", "division by zero"),
        ("5 % 0", "modulo by zero"),
        ("0 ** -1", "zero cannot be raised to a negative power"),
        ("10 ** 1001", "result too large"),
        ("9 ** 9 ** 9", "result too large"),
        ("2 ** 2 ** 2 ** 2 ** 2", "result too large"),
        ("10 ** 600 * 10 ** 600", "result too large"),
        ("2.0 ** 10000", "too large for a floating-point number"),
        ("10 ** 400 / 3", "too large for a floating-point number"),
        ("1e308 * 10", "overflows"),
        ("1e999", "overflows"),
        ("(-8) ** (1 / 3)", "not a real number"),
    ],
)
def test_refusals(expression: str, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        calculate(expression, LIMITS)


def test_long_input_is_refused() -> None:
    with pytest.raises(ToolError, match="the limit is 10"):
        calculate("1 + " * 3 + "1", ToolLimits(max_input_chars=10))


def test_deep_nesting_is_refused_quickly() -> None:
    start = time.perf_counter()
    with pytest.raises(ToolError, match="nested too deeply"):
        calculate("-" * (MAX_DEPTH + 5) + "1", LIMITS)  # a valid tree deeper than MAX_DEPTH
    with pytest.raises(ToolError):
        calculate("(" * 1000 + "1" + ")" * 1000, ToolLimits(max_input_chars=5000))  # past the parser's own limit
    assert time.perf_counter() - start < 1.0


def test_huge_power_is_refused_before_computing() -> None:
    start = time.perf_counter()
    with pytest.raises(ToolError, match="result too large"):
        calculate("7 ** 123456789", LIMITS)
    assert time.perf_counter() - start < 0.1  # computing it would take minutes


def test_powers_of_zero_and_one_are_cheap() -> None:
    assert calculate("1 ** 10 ** 18", LIMITS) == "1"
    assert calculate("(-1) ** (10 ** 18 + 1)", LIMITS) == "-1"
    assert calculate("0 ** 10 ** 18", LIMITS) == "0"
