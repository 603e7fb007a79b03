"""Countdown grading: is the last ``\\boxed{...}`` an expression that uses each given number exactly once
and equals the target?

The ground truth is encoded as ``"<n1>,<n2>,...=<target>"``, e.g. ``"3,5,7=22"`` (decimal integers, the
numbers non-negative, no spaces). Rules for the boxed expression:

- operators ``+ - * /`` and parentheses only; no unary minus or plus, no ``**`` or ``//``, no names, calls
  or decimals; implicit multiplication such as ``2(3+4)`` is not an expression;
- the multiset of integer literals equals the given numbers (each used exactly once, repeats as given);
- exact rational arithmetic (``fractions.Fraction``): ``7/2*2`` is 7; division by zero makes it wrong;
- at most ``MAX_EXPRESSION_CHARS`` characters in the box and intermediate values within ``MAX_MAGNITUDE``;
- LaTeX is normalised first: ``\\times \\cdot \\ast × · ⋅ ∗`` become ``*``, ``\\div ÷ ∕`` become ``/``,
  ``− –`` become ``-``, ``\\left``/``\\right`` go, ``[ ]`` and ``{ }`` group like parentheses,
  ``\\frac{a}{b}`` (also ``\\dfrac``, ``\\tfrac``) is ``((a)/(b))``, and ``\\, \\; \\! $`` are dropped;
- an ``= ...`` suffix is dropped: ``\\boxed{(7-3)*5+2 = 22}`` is graded as ``(7-3)*5+2``.

Example::

    >>> grade("So \\\\boxed{(7 - 3) \\\\times 5 + 2}", "3,5,7,2=22")["score"]
    1.0

The expression is never run: it is parsed with ``ast.parse(mode="eval")`` and only whitelisted nodes
are walked.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from relay.scoring.answer import last_boxed
from relay.scoring.grade_settings import DEFAULT_SETTINGS, GradeSettings

MAX_EXPRESSION_CHARS = 200
MAX_MAGNITUDE = 10**12

_GROUND_TRUTH_RE = re.compile(r"(\d+(?:,\d+)*)=(-?\d+)")
# Each symbol in a tuple becomes its key: "\left(" loses "\left", "\," becomes a space.
_REPLACEMENTS = {
    "*": ("\\times", "\\cdot", "\\ast", "×", "·", "⋅", "∗"),
    "/": ("\\div", "÷", "∕"),
    "-": ("−", "–"),
    " ": ("\\,", "\\;", "\\ "),
    "": ("\\left", "\\right", "\\!", "$"),
}
_FRAC_RE = re.compile(r"\\[dt]?frac")
_ALLOWED_RE = re.compile(r"[0-9+\-*/() ]*")
_IMPLICIT_PRODUCT_RE = re.compile(r"[0-9)] *\(")  # "2(3)" or ")(" would parse as a call
# A stretch of text that could be an expression (the lenient reading): digits, operators, parentheses, spaces.
_CANDIDATE_RE = re.compile(r"[0-9(](?:[0-9+\-*/() ]*[0-9)])?")
# The most candidate stretches the lenient reading tries in one response (the last ones: answers come late).
MAX_LENIENT_CANDIDATES = 64
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


class CountdownExpressionError(ValueError):
    """A boxed expression breaks a rule; the response scores as formatted but wrong."""


def countdown_ground_truth(numbers: Iterable[int], target: int) -> str:
    """Encode a puzzle for the ``ground_truth`` column: ``countdown_ground_truth([3, 5, 7], 22) == "3,5,7=22"``."""
    values = [operator.index(n) for n in numbers]
    if not values or min(values) < 0:
        raise ValueError(f"countdown numbers must be a non-empty list of non-negative integers, got {values}")
    return ",".join(map(str, values)) + f"={operator.index(target)}"


def parse_countdown_ground_truth(text: str) -> tuple[list[int], int]:
    """Decode ``"3,5,7=22"`` into ``([3, 5, 7], 22)``; raises ValueError on anything else."""
    match = _GROUND_TRUTH_RE.fullmatch(text)
    if match is None:
        raise ValueError(f"malformed countdown ground truth {text!r}; expected e.g. '3,5,7=22'")
    return [int(n) for n in match.group(1).split(",")], int(match.group(2))


def _brace_group(text: str, i: int) -> tuple[str, int]:
    """The content of the balanced ``{...}`` starting at ``text[i]`` (after spaces) and the index past it."""
    while i < len(text) and text[i] == " ":
        i += 1
    if i >= len(text) or text[i] != "{":
        raise CountdownExpressionError("\\frac needs two {...} groups")
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1 : j], j + 1
    raise CountdownExpressionError("unbalanced braces")


def normalize_expression(text: str) -> str:
    """LaTeX and unicode operators to plain ``+ - * / ( )``, spaces collapsed, an ``= ...`` suffix dropped.

    ``normalize_expression("\\\\frac{20}{4} \\\\times 3 = 15") == "((20)/(4)) * 3"``. Raises
    CountdownExpressionError on a ``\\frac`` without two brace groups.
    """
    for new, olds in _REPLACEMENTS.items():
        for old in olds:
            text = text.replace(old, new)
    text = " ".join(text.split())
    while match := _FRAC_RE.search(text):
        numerator, end = _brace_group(text, match.end())
        denominator, end = _brace_group(text, end)
        text = f"{text[: match.start()]}(({numerator})/({denominator})){text[end:]}"
    text = text.translate(str.maketrans("[]{}", "()()"))
    return text.split("=", 1)[0].strip()


def _evaluate(node: ast.AST) -> Fraction:
    """Exact value of a whitelisted expression tree; raises CountdownExpressionError on anything else."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Fraction(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Div) and right == 0:
            raise CountdownExpressionError("division by zero")
        value = _OPS[type(node.op)](left, right)
        if abs(value.numerator) > MAX_MAGNITUDE or value.denominator > MAX_MAGNITUDE:
            raise CountdownExpressionError("an intermediate value is too large")
        return value
    raise CountdownExpressionError(f"{type(getattr(node, 'op', node)).__name__} is not allowed")


def evaluate_countdown(expression: str, numbers: list[int]) -> Fraction:
    """The exact value of a normalised expression that uses each of ``numbers`` exactly once.

    ``evaluate_countdown("(7 - 3) * 5 + 2", [2, 3, 5, 7]) == Fraction(22)``. Raises CountdownExpressionError
    when a rule is broken (syntax, a literal used a wrong number of times, division by zero, a value too large).
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CountdownExpressionError(f"longer than {MAX_EXPRESSION_CHARS} characters")
    if not _ALLOWED_RE.fullmatch(expression) or _IMPLICIT_PRODUCT_RE.search(expression):
        raise CountdownExpressionError("only integers, + - * / and parentheses are allowed")
    try:
        tree = ast.parse(expression, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as err:
        raise CountdownExpressionError("not an expression") from err
    literals = [node.value for node in ast.walk(tree.body) if isinstance(node, ast.Constant)]
    if sorted(literals) != sorted(numbers):
        raise CountdownExpressionError(f"uses {sorted(literals)}, not each of {sorted(numbers)} exactly once")
    return _evaluate(tree.body)


def grade(response_text: str, ground_truth: str, settings: GradeSettings = DEFAULT_SETTINGS) -> dict[str, Any]:
    """Score a Countdown response: 1.0 if its last ``\\boxed{...}`` reaches the target under the rules above.

    Returns ``{"score", "acc", "extracted", "formatted"}``. ``formatted`` is True when a non-empty
    ``\\boxed{...}`` with balanced braces is present. ``extracted`` is its normalised expression (its raw
    content when that fails, cut to ``MAX_EXPRESSION_CHARS`` when longer; None when unformatted). A
    formatted response that breaks a rule or misses the target scores ``settings.format_score``.
    ``settings.use_last_number_fallback`` and ``settings.math_verify_timeouts`` are ignored: the answer is an
    expression, never a last number, and no math-verify runs. Raises ValueError if ``ground_truth`` is malformed.
    """
    numbers, target = parse_countdown_ground_truth(ground_truth)
    extracted = (last_boxed(response_text) or "").strip()
    if not extracted:
        return {"score": 0.0, "acc": 0.0, "extracted": None, "formatted": False}
    if len(extracted) > MAX_EXPRESSION_CHARS:
        cut = extracted[:MAX_EXPRESSION_CHARS]
        return {"score": settings.format_score, "acc": 0.0, "extracted": cut, "formatted": True}
    try:
        extracted = normalize_expression(extracted)
        correct = evaluate_countdown(extracted, numbers) == target
    except CountdownExpressionError:
        correct = False
    score = 1.0 if correct else settings.format_score
    return {"score": score, "acc": float(correct), "extracted": extracted, "formatted": True}


def lenient_correct(response_text: str, ground_truth: str) -> bool:
    """Whether any expression written anywhere in the response (not only in the last ``\\boxed{}``) uses each
    number exactly once and reaches the target: Countdown's lenient reading, the skill with the format set aside.

    The text is normalised as a boxed expression is (LaTeX operators, ``\\frac``), cut at every ``=`` and line
    end, and each stretch of digits, operators and parentheses is tried (the last ``MAX_LENIENT_CANDIDATES``),
    under the same rules as :func:`grade`; nothing is run.

    Worked example, ground truth ``"3,5,7,2=22"``: ``"(7 - 3) * 5 + 2 = 22, so \\boxed{22}"`` is strictly
    wrong (the box holds 22, not an expression of the numbers) and leniently right; ``"7 + 3 + 5 + 2 = 17"`` is
    wrong both ways.
    """
    numbers, target = parse_countdown_ground_truth(ground_truth)
    pieces = []
    for part in re.split(r"[=\n]|\\[()\[\]]", response_text):  # math delimiters \( \) \[ \] end a stretch
        try:
            part = normalize_expression(part)
        except CountdownExpressionError:
            continue
        pieces += [m.group(0) for m in _CANDIDATE_RE.finditer(part)]
    for piece in pieces[-MAX_LENIENT_CANDIDATES:]:
        try:
            if evaluate_countdown(piece, numbers) == target:
                return True
        except CountdownExpressionError:
            continue
    return False
