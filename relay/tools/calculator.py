"""The calculator tool: arithmetic evaluated from a parsed expression tree, never with ``eval``.

Accepted: int and float literals (``1_000``, ``2.5``, ``1e3``), ``+ - * / // % **``, unary ``+``/``-`` and
parentheses. Anything else (names, calls, attributes, subscripts, comparisons, strings, booleans, tuples)
is refused. Before parsing, the way small models write arithmetic is normalised:

- ``$`` signs and one trailing ``=`` are dropped (``"$12 * 3 ="``), and runs of whitespace, newlines
  included, become one space;
- a comma between a digit and a group of exactly three digits is a thousands separator (``1,000,000``);
- ``×`` and ``÷`` mean ``*`` and ``/``, ``^`` means ``**`` (powers, not XOR), ``−`` (U+2212) means ``-``.
  A letter ``x`` is not read as a multiplication: it cannot be told apart from a name.

Guards, each a ``ToolError`` with its own message: input over ``max_input_chars``; an exponent whose result
would have more than ``MAX_RESULT_DIGITS`` digits (checked before computing, from ``log10``); any int result
over that size; division or modulo by zero; a float result that overflows or is inf/nan; a complex result;
nesting deeper than ``MAX_DEPTH``.

Output: an int prints as an int (``24``); a float prints as an int when it is integral and below ``1e15``
(``24.0`` -> ``24``), otherwise with up to ``SIGNIFICANT_DIGITS`` significant digits (``0.3333333333``,
``1e+20``).
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable

from relay.tools import ToolError, ToolLimits

MAX_RESULT_DIGITS = 1000  # ints beyond this many decimal digits are refused
MAX_DEPTH = 100  # deepest expression tree evaluated
SIGNIFICANT_DIGITS = 10
INTEGRAL_FLOAT_BOUND = 1e15  # integral floats below this print as ints; above, their low digits are noise

Number = int | float

_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_ALLOWED = "only numbers, + - * / // % ** and parentheses are allowed"
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_SYMBOLS = str.maketrans({"×": "*", "÷": "/", "−": "-", "$": None})


def normalise(expression: str) -> str:
    """The expression as Python arithmetic: see the module docstring for each rewrite."""
    text = " ".join(expression.translate(_SYMBOLS).split())  # newlines inside an expression too
    if text.endswith("="):
        text = text[:-1].rstrip()
    text = _THOUSANDS.sub("", text)
    return text.replace("^", "**")


def _int_digits(value: int) -> int:
    """Decimal digits of ``value`` (within one), from its bit length: no string conversion."""
    return int(abs(value).bit_length() * math.log10(2)) + 1


def _check_power(base: Number, exponent: Number) -> None:
    """Refuse ``base ** exponent`` when its result would exceed ``MAX_RESULT_DIGITS`` digits."""
    if not isinstance(base, int) or not isinstance(exponent, int) or exponent <= 0 or abs(base) <= 1:
        return  # float powers overflow to an OverflowError; 0, 1 and -1 stay small; negative exponents give floats
    digits = exponent * math.log10(abs(base))
    if digits > MAX_RESULT_DIGITS:
        raise ToolError(f"result too large: about {digits:.0f} digits (the limit is {MAX_RESULT_DIGITS})")


def _check_result(value: Number | complex) -> Number:
    if isinstance(value, complex):
        raise ToolError("the result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError("result overflows (infinite or not a number)")
    if isinstance(value, int) and _int_digits(value) > MAX_RESULT_DIGITS:
        raise ToolError(f"result too large: more than {MAX_RESULT_DIGITS} digits")
    return value


def _binary(node: ast.BinOp, left: Number, right: Number) -> Number:
    op = type(node.op)
    if op is ast.Pow:
        _check_power(left, right)
    if op in (ast.Div, ast.FloorDiv, ast.Mod) and right == 0:
        raise ToolError("modulo by zero" if op is ast.Mod else "division by zero")
    try:
        return _check_result(_BINARY[op](left, right))
    except ZeroDivisionError as exc:  # 0 ** -1
        raise ToolError("zero cannot be raised to a negative power") from exc
    except OverflowError as exc:  # float pow, or an int too large for a float division
        raise ToolError("result too large for a floating-point number") from exc


def _evaluate(node: ast.AST, depth: int = 0) -> Number:
    if depth > MAX_DEPTH:
        raise ToolError(f"expression nested too deeply (more than {MAX_DEPTH} levels)")
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _check_result(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _check_result(_UNARY[type(node.op)](_evaluate(node.operand, depth + 1)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _binary(node, _evaluate(node.left, depth + 1), _evaluate(node.right, depth + 1))
    kind = type(node.op if isinstance(node, ast.BinOp | ast.UnaryOp) else node).__name__
    if isinstance(node, ast.Constant):
        kind = type(node.value).__name__
    raise ToolError(f"unsupported element {kind}: {_ALLOWED}")


def format_number(value: Number) -> str:
    """``24`` for ints and integral floats below 1e15, else up to ``SIGNIFICANT_DIGITS`` significant digits."""
    if isinstance(value, float) and value.is_integer() and abs(value) < INTEGRAL_FLOAT_BOUND:
        value = int(value)
    if isinstance(value, int):
        return str(value)
    return f"{value:.{SIGNIFICANT_DIGITS}g}"


def calculate(expression: str, limits: ToolLimits) -> str:
    """The value of the arithmetic ``expression`` as text; ``ToolError`` for anything else (module docstring)."""
    if len(expression) > limits.max_input_chars:
        raise ToolError(f"expression is {len(expression)} characters; the limit is {limits.max_input_chars}")
    text = normalise(expression)
    if not text:
        raise ToolError("empty expression")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"not an arithmetic expression: {exc.msg}") from exc
    except (RecursionError, MemoryError, ValueError) as exc:  # parser limits; ValueError: NUL bytes
        raise ToolError("expression too deeply nested or malformed") from exc
    return format_number(_evaluate(tree.body))
