"""When two generated questions are the same problem: the key that a held-out split keeps distinct and that
training rows must not share with it.

Two questions are the same problem when they differ only in spacing, letter case, or the order of the terms of a
sum or a product of whole numbers: "Calculate 47 + 8." and "calculate 8+47." have one key, so a held-out sum's
commutative twin never trains. A mixed chain ("3 - 2 + 1") keeps its order: reordering it changes its value.

>>> problem_key("Calculate 47 + 8.") == problem_key("calculate  8+47.")
True
>>> problem_key("Calculate 47 + 8.")
'calculate 8 + 47.'
>>> problem_key("What is 3 - 2 + 1?")
'what is 3 - 2 + 1?'
>>> problem_key("What is 10-(4+3)?")
'what is 10-(3 + 4)?'
"""

from __future__ import annotations

import re

# A maximal chain of numbers and arithmetic operators (a leading minus included, so "-5 + 3" is seen whole).
_CHAIN = re.compile(r"-?\d+(?:\.\d+)?(?:\s*[-+*×/]\s*\d+(?:\.\d+)?)+")
_OPERATOR = re.compile(r"\s*([-+*×/])\s*")
COMMUTATIVE = frozenset("+*×")


def chains(text: str) -> list[tuple[list[str], list[str]]]:
    """The arithmetic chains of ``text``, each as its terms and its operators.

    >>> chains("Calculate 47 + 8, then 3 - 2 * 5.")
    [(['47', '8'], ['+']), (['3', '2', '5'], ['-', '*'])]
    """
    return [_split(m.group(0)) for m in _CHAIN.finditer(text)]


def _split(chain: str) -> tuple[list[str], list[str]]:
    parts = _OPERATOR.split(chain)
    return parts[0::2], parts[1::2]


def _sorted_chain(match: re.Match[str]) -> str:
    """A chain of whole numbers joined by one commutative operator with its terms in ascending order; any other
    chain (mixed operators, a leading minus, a decimal) as it is."""
    terms, ops = _split(match.group(0))
    operators = set(ops)
    if len(operators) != 1 or not operators <= COMMUTATIVE or not all(t.isdigit() for t in terms):
        return match.group(0)
    (operator,) = operators
    return f" {operator} ".join(sorted(terms, key=lambda t: (int(t), t)))


def problem_key(question: str) -> str:
    """``question`` lower-cased, its whitespace collapsed, and each sum or product of whole numbers written with its
    terms in ascending order (module docstring)."""
    text = " ".join(question.lower().split())
    return _CHAIN.sub(_sorted_chain, text)
