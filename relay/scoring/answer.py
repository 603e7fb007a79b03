"""Final-answer extraction from model responses (no math, just text)."""

from __future__ import annotations

import re

_HASH_RE = re.compile(r"####[ \t]*([^\n]*)")
_BOXED = "\\boxed{"
# The answer runs to the end of its sentence or line, so several can share a line.
_ANSWER_IS_RE = re.compile(r"\banswer(?:\s+is\s*:?|\s*:)[ \t]*([^\n]*?)(?=\.(?:\s|$)|\n|$)", re.IGNORECASE)
# A period followed by whitespace or the end of the string ends the answer ("18. So ..." -> "18").
_SENTENCE_END_RE = re.compile(r"\.(?=\s|$)")
_THOUSANDS_COMMA_RE = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
# A single number followed only by words, e.g. "18 dollars" or "5 apples per box" -> the number.
_NUMBER_THEN_WORDS_RE = re.compile(r"(-?(?:\d+(?:\.\d+)?|\.\d+)(?:/\d+)?%?)\s*[A-Za-z][A-Za-z\s]*")
# The prompt's own placeholder copied as the answer (``\\boxed{<answer>}``, ``#### <your answer>``): angle brackets
# around words. It is no answer, so it is never "where the prompt asked" and earns no format score: with a format
# score a GRPO run can settle on copying it, short and always formatted (the arithmetic preset did in one seed).
_PLACEHOLDER_RE = re.compile(r"\s*<[^<>\d]*>\s*")
_NUMBER_RE = re.compile(r"(?:(?<![\d.])-)?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|(?:(?<!\d)-)?\.\d+")


def normalize_answer(text: str) -> str:
    """Strip spaces, ``$`` signs, a trailing sentence, thousands commas and trailing unit words."""
    text = _SENTENCE_END_RE.split(text.strip(), maxsplit=1)[0]
    text = text.replace("\\$", "").replace("$", "").strip()
    text = _THOUSANDS_COMMA_RE.sub("", text)
    match = _NUMBER_THEN_WORDS_RE.fullmatch(text)
    return match.group(1) if match else text


def is_placeholder(answer: str) -> bool:
    """Whether ``answer`` is a template's placeholder rather than an answer (angle brackets around words).

    >>> is_placeholder("<answer>"), is_placeholder(" <your answer> "), is_placeholder("<5>"), is_placeholder("x < 3")
    (True, True, False, False)
    """
    return _PLACEHOLDER_RE.fullmatch(answer) is not None


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` with balanced braces, or None."""
    start = text.rfind(_BOXED)
    while start != -1:
        depth, i = 1, start + len(_BOXED)
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            return text[start + len(_BOXED) : i - 1]
        start = text.rfind(_BOXED, 0, start)
    return None


def _last_group(pattern: re.Pattern[str], text: str) -> str | None:
    """Group 1 of the last match of ``pattern`` in ``text``, or None."""
    matches = pattern.findall(text)
    return matches[-1] if matches else None


def extract_answer(text: str) -> str | None:
    """The normalised final answer, preferring ``#### X``, then ``\\boxed{X}``, then "the answer is X".

    Each rule takes its last occurrence; a rule whose answer normalises to "" falls through
    to the next. Returns None when no rule yields an answer.
    """
    for candidate in answer_candidates(text):
        if candidate is not None and (answer := normalize_answer(candidate)):
            return answer
    return None


def answer_candidates(text: str) -> tuple[str | None, str | None, str | None]:
    """The raw final-answer candidates in the order the graders prefer them: the last ``#### X``, the last
    ``\\boxed{X}``, the last "the answer is X" (None where a rule finds nothing or only a placeholder:
    :func:`is_placeholder`)."""
    found = (_last_group(_HASH_RE, text), last_boxed(text), _last_group(_ANSWER_IS_RE, text))
    return tuple(None if c is None or is_placeholder(c) else c for c in found)  # type: ignore[return-value]


def extract_last_number(text: str) -> str | None:
    """The last number in ``text`` (thousands commas removed), or None; a lenient fallback."""
    matches = _NUMBER_RE.findall(text)
    return matches[-1].replace(",", "") if matches else None


def final_answer_text(text: str) -> str | None:
    """The final answer as :func:`extract_answer` finds it (``#### X``, then the last ``\\boxed{X}``, then "the answer
    is X"; each rule's last occurrence; an empty answer falls through), stripped but not otherwise normalised: what
    text graders compare."""
    for candidate in answer_candidates(text):
        if candidate is not None and candidate.strip():
            return candidate.strip()
    return None


def answer_to_grade(formatted_answer: str | None, text: str, use_last_number_fallback: bool) -> tuple[str | None, bool]:
    """``(the answer a grader compares, whether it was where the prompt asked)``: ``formatted_answer`` when there is
    one (and not a placeholder: :func:`is_placeholder`), else with ``use_last_number_fallback`` the last number of
    ``text`` (unformatted), else ``(None, False)``.

    >>> answer_to_grade(None, "so 7 then 8", True), answer_to_grade("9", "so 7 then 8", True)
    (('8', False), ('9', True))
    >>> answer_to_grade("<answer>", "7 + 8 = \\\\boxed{<answer>}", False)
    (None, False)
    """
    if formatted_answer is not None and not is_placeholder(formatted_answer):
        return formatted_answer, True
    return (extract_last_number(text) if use_last_number_fallback else None), False
