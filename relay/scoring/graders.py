"""Graders by name, so one batch can mix tasks: ``gsm8k``, ``math``, ``exact``, ``regex``, ``countdown`` and
``reasoning_gym``, and a user's ``package.module:callable`` (:mod:`relay.scoring.user_grader`).

Every shipped grader is called as ``fn(response_text, ground_truth, settings, **options)`` and returns ``{"score",
"acc", "extracted", "formatted"}`` as grader.grade does: 1.0 when correct, ``settings.format_score`` when a formatted
answer is wrong, 0.0 when the response has no formatted answer. ``settings`` is a
:class:`~relay.scoring.grade_settings.GradeSettings` (format score, last-number fallback, math-verify timeouts; the
defaults when left out); with ``settings.use_last_number_fallback`` an unformatted response is graded on its last
number (correct -> 1.0, wrong -> 0.0). ``options`` are the grader's own keyword arguments (``reward.grader_options``);
check them with check_grader before grading. A user's grader gets only ``options`` (:mod:`relay.scoring.user_grader`).
A pattern from the config is only compiled as a regular expression; nothing in a config, a response or a ground truth
is evaluated as code.

Strict and lenient: a grader's ``acc`` is *strict*, the answer where the prompt asks for it. :func:`lenient_acc`
also counts a response whose **last number** is right by the same grader (``"5 + 3 is 8"`` against ``8``): the
skill without the format. Comparing the two tells a format gain from a skill gain.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

from relay.scoring.answer import answer_to_grade, extract_last_number, final_answer_text, last_boxed
from relay.scoring.grade_settings import DEFAULT_SETTINGS, GradeSettings
from relay.scoring.grader import MATH_VERIFY_TIMEOUT_S, grade
from relay.scoring.user_grader import grade_with_user_grader, is_user_grader, load_user_grader

Grader = Callable[..., dict[str, Any]]

_LATEX_AND_EXPR = (LatexExtractionConfig(), ExprExtractionConfig())


def _result(correct: bool, extracted: str | None, formatted: bool, format_score: float) -> dict[str, Any]:
    score = 1.0 if correct else (format_score if formatted else 0.0)
    return {"score": score, "acc": float(correct), "extracted": extracted, "formatted": formatted}


def grade_math(response_text: str, ground_truth: str, settings: GradeSettings = DEFAULT_SETTINGS) -> dict[str, Any]:
    """Final-answer grading for LaTeX answers: the last ``\\boxed{...}`` of the response (balanced braces)
    against ``ground_truth`` with math-verify.

    The ground truth is a LaTeX string (``\\frac{1}{2}``, ``2\\sqrt{3}``, ``[1, 2)``, ``x^2+1``, ``\\{1,2\\}``,
    ``50\\%``); one that contains ``\\boxed{...}`` is graded on its content. Both are parsed as inline LaTeX
    (``$...$``) or as a plain expression, and compared symbolically: ``\\boxed{\\frac{2}{4}}`` equals ``0.5``,
    ``\\boxed{1+x^2}`` equals ``x^2+1``, ``\\boxed{\\sqrt{12}}`` equals ``2\\sqrt{3}``. An empty box is no answer.
    Raises ValueError if math-verify cannot parse ``ground_truth``.
    """
    boxed = last_boxed(response_text)
    in_box = boxed.strip() if boxed is not None and boxed.strip() else None
    extracted, formatted = answer_to_grade(in_box, response_text, settings.use_last_number_fallback)
    if extracted is None:
        return _result(False, None, False, 0.0)

    timeout_s = MATH_VERIFY_TIMEOUT_S if settings.math_verify_timeouts else None
    gold_boxed = last_boxed(ground_truth)
    gold_text = gold_boxed if gold_boxed is not None else ground_truth
    gold = parse(f"${gold_text}$", extraction_config=_LATEX_AND_EXPR, parsing_timeout=timeout_s)
    if not gold:
        raise ValueError(f"math-verify could not parse the ground truth {ground_truth!r}")
    answer = parse(f"${extracted}$", extraction_config=_LATEX_AND_EXPR, parsing_timeout=timeout_s)
    correct = verify(gold, answer, timeout_seconds=timeout_s)
    return _result(correct, extracted, formatted, settings.format_score)


def normalize_text(text: str, *, case_sensitive: bool = False) -> str:
    """The form ``exact`` and ``regex`` compare: whitespace collapsed, one trailing period dropped, casefolded.

    ``normalize_text("  New   York City. ") == "new york city"``; with ``case_sensitive`` the case is kept.
    """
    text = " ".join(text.split())
    if text.endswith("."):
        text = text[:-1].rstrip()
    return text if case_sensitive else text.casefold()


def _compare_text(
    extracted: str | None,
    response_text: str,
    ground_truth: str,
    settings: GradeSettings,
    case_sensitive: bool,
) -> dict[str, Any]:
    """Grade ``extracted`` (the grader's formatted answer, None when there is none) as ``exact`` does."""
    extracted, formatted = answer_to_grade(extracted, response_text, settings.use_last_number_fallback)
    if extracted is None:
        return _result(False, None, False, 0.0)
    correct = normalize_text(extracted, case_sensitive=case_sensitive) == normalize_text(
        ground_truth, case_sensitive=case_sensitive
    )
    return _result(correct, extracted, formatted, settings.format_score)


def grade_exact(
    response_text: str, ground_truth: str, settings: GradeSettings = DEFAULT_SETTINGS, *, case_sensitive: bool = False
) -> dict[str, Any]:
    """Exact-match grading: the response's final answer (``#### X``, else the last ``\\boxed{X}``, else "the
    answer is X") equals ``ground_truth`` after normalize_text. No numeric or unit normalisation: ``#### 18.0``
    does not equal ``18``, while ``The answer is  PARIS.`` equals ``paris``. ``settings.math_verify_timeouts`` is
    unused.
    """
    return _compare_text(final_answer_text(response_text), response_text, ground_truth, settings, case_sensitive)


@functools.lru_cache(maxsize=64)
def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def grade_regex(
    response_text: str,
    ground_truth: str,
    settings: GradeSettings = DEFAULT_SETTINGS,
    *,
    pattern: str,
    case_sensitive: bool = False,
) -> dict[str, Any]:
    """Regex grading: the last match of ``pattern`` in the response is the answer (its group 1 when the
    pattern has a group, else the whole match), compared with ``ground_truth`` as ``exact`` compares.

    A match whose answer is empty or whose group 1 did not take part is skipped. Example: with
    ``pattern=r"Choice:\\s*\\(?([A-E])"``, ``"Choice: (b) ... Choice: C"`` answers ``"C"``.
    ``settings.math_verify_timeouts`` is unused.
    """
    compiled = _compile(pattern)
    extracted = None
    for match in compiled.finditer(response_text):
        answer = match.group(1) if compiled.groups else match.group(0)
        if answer and answer.strip():
            extracted = answer.strip()
    return _compare_text(extracted, response_text, ground_truth, settings, case_sensitive)


def grade_reasoning_gym(
    response_text: str, ground_truth: str, settings: GradeSettings = DEFAULT_SETTINGS, **options: Any
) -> dict[str, Any]:
    """relay.scoring.reasoning_gym.grade_reasoning_gym, imported on first use (reasoning-gym loads ~1 s)."""
    from relay.scoring.reasoning_gym import grade_reasoning_gym as grade_rg

    return grade_rg(response_text, ground_truth, settings, **options)


def grade_countdown(
    response_text: str, ground_truth: str, settings: GradeSettings = DEFAULT_SETTINGS, **options: Any
) -> dict[str, Any]:
    """relay.scoring.countdown.grade, imported on first use."""
    from relay.scoring.countdown import grade as countdown_grade

    return countdown_grade(response_text, ground_truth, settings, **options)


GRADERS: dict[str, Grader] = {
    "gsm8k": grade,
    "math": grade_math,
    "exact": grade_exact,
    "regex": grade_regex,
    "countdown": grade_countdown,
    "reasoning_gym": grade_reasoning_gym,
}

# The options each grader accepts (``reward.grader_options``); ``regex`` cannot do without ``pattern``.
GRADER_OPTIONS: dict[str, frozenset[str]] = {
    "gsm8k": frozenset(),
    "math": frozenset(),
    "exact": frozenset({"case_sensitive"}),
    "regex": frozenset({"pattern", "case_sensitive"}),
    "countdown": frozenset(),
    "reasoning_gym": frozenset({"partial_credit"}),
}


def grade_item(
    grader: str,
    response_text: str,
    ground_truth: str,
    options: Mapping[str, Any] | None = None,
    settings: GradeSettings = DEFAULT_SETTINGS,
) -> dict[str, Any]:
    """Grade one response with the grader named ``grader``, passing ``options`` (its own keyword arguments) and
    ``settings`` (the shared :class:`~relay.scoring.grade_settings.GradeSettings`). A user's grader
    (``package.module:callable``) gets ``options`` only: it decides its own partial credit.

    ``grade_item("regex", "Choice: B", "b", {"pattern": r"Choice: (\\w)"})["score"] == 1.0``.
    Raises ValueError for an unknown grader.
    """
    if is_user_grader(grader):  # reward.grader: package.module:callable
        return grade_with_user_grader(grader, response_text, ground_truth, options)
    try:
        fn = GRADERS[grader]
    except KeyError:
        raise ValueError(f"unknown grader {grader!r}; choose one of {sorted(GRADERS)}") from None
    return fn(response_text, ground_truth, settings, **(options or {}))


def lenient_acc(
    grader: str,
    response_text: str,
    ground_truth: str,
    strict_acc: float,
    options: Mapping[str, Any] | None = None,
    settings: GradeSettings = DEFAULT_SETTINGS,
) -> float:
    """1.0 when the response is right strictly (``strict_acc``) or its last number is right by ``grader``, else 0.

    The last number is graded as a bare answer (the grader's last-number fallback), so the comparison is the
    grader's own: math-verify for ``gsm8k`` and ``math``, text for ``exact``, the dataset's verifier for
    ``reasoning_gym``. ``countdown``'s answer is an expression, not a number: any expression written in the
    response that reaches the target counts (:func:`relay.scoring.countdown.lenient_correct`). A user's grader
    has no lenient reading: its lenient accuracy is the strict one.

    Worked example: ``lenient_acc("exact", "\\boxed{9}, or rather 5 + 3 = 8", "8", 0.0) == 1.0`` (strictly wrong:
    the boxed answer is 9); ``lenient_acc("exact", "it is 7", "8", 0.0) == 0.0``.
    """
    if strict_acc > 0.5:
        return 1.0
    if is_user_grader(grader):
        return 0.0
    if grader == "countdown":
        from relay.scoring.countdown import lenient_correct

        return float(lenient_correct(response_text, ground_truth))
    number = extract_last_number(response_text)
    if number is None:
        return 0.0
    bare = replace(settings, use_last_number_fallback=True, format_score=0.0)
    return float(grade_item(grader, number, ground_truth, options, bare)["acc"] > 0.5)


def check_grader(
    name: str,
    options: Mapping[str, Any] | None,
    *,
    grader_key: str = "reward.grader",
    options_key: str = "reward.grader_options",
) -> list[str]:
    """The problems with grading by ``name`` with ``options``, each naming its config key and the fix; [] if none.

    ``check_grader("regex", {})`` ->
    ``["reward.grader_options.pattern: the 'regex' grader needs it; set it to a regular expression whose group 1
    (or whole match) is the answer"]``.
    """
    if is_user_grader(name):
        try:
            load_user_grader(name)
        except ValueError as e:
            return [str(e).replace("reward.grader=", f"{grader_key}=", 1)]
        return [] if options is None or isinstance(options, Mapping) else [f"{options_key}={options!r}: not a mapping"]
    if name not in GRADERS:
        return [
            f"{grader_key}={name!r}: unknown; choose one of {sorted(GRADERS)} or a function 'package.module:callable'"
        ]
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        return [f"{options_key}={options!r}: not a mapping; give option names and values"]
    problems = []
    allowed = GRADER_OPTIONS[name]
    for key in options:
        if key not in allowed:
            takes = f"its options are {sorted(allowed)}" if allowed else "it takes no options"
            problems.append(f"{options_key}.{key}: not an option of the {name!r} grader; remove it ({takes})")
    if "case_sensitive" in allowed and not isinstance(options.get("case_sensitive", False), bool):
        problems.append(f"{options_key}.case_sensitive={options['case_sensitive']!r}: must be true or false")
    if name == "regex" and "pattern" not in options:
        problems.append(
            f"{options_key}.pattern: the 'regex' grader needs it; set it to a regular expression whose group 1 "
            "(or whole match) is the answer"
        )
    elif name == "regex":
        pattern = options["pattern"]
        if not isinstance(pattern, str) or not pattern:
            problems.append(f"{options_key}.pattern={pattern!r}: must be a non-empty regular expression string")
        else:
            try:
                re.compile(pattern)
            except re.error as e:
                problems.append(f"{options_key}.pattern={pattern!r}: does not compile ({e}); fix the expression")
    if name == "countdown":
        try:
            import relay.scoring.countdown  # noqa: F401
        except ImportError as e:
            problems.append(f"{grader_key}={name!r}: its module cannot be imported ({e}); choose another grader")
    return problems
