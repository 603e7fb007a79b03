"""An LLM judge's score of each (question, response): a rubric filled in, sent through the judge model's chat
template, and answered either by one token (``yes_probability``) or by a number (``number``).

``yes_probability``: the judge's next token after the prompt is restricted to the rubric's two answer tokens
(``allowed_token_ids``) and decoded greedily; the engine returns the log-probability of the token it chose under
that restricted, renormalised distribution (vLLM's ``processed_logprobs``: the allowed-token mask is applied before
the log-softmax, ``vllm/v1/sample/sampler.py`` ``Sampler.forward`` and ``Sampler.sample`` in vLLM 0.32; the
transformers engine's mask runs before its log-prob recorder). Two tokens share the mass, so one log-prob gives both:
``P(yes) = exp(lp)`` when the judge chose yes, ``1 - exp(lp)`` when it chose no. The score is ``P(yes)`` in [0, 1],
the same with either engine, with no sampling noise.

``number``: the judge writes up to ``max_new_tokens`` tokens greedily; the first number in them, divided by
``number_max``, is the score. An answer with no number, or one outside ``[0, number_max]``, is a parse failure:
counted, and scored ``parse_failure_score``.

Worked example: yes/no ids 9 and 4; the judge chose 9 with log-prob -0.105 -> ``P(yes) = exp(-0.105) = 0.90``;
it chose 4 with log-prob -0.105 -> ``P(yes) = 0.10``.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

PLACEHOLDERS = ("question", "response", "reference")  # what a rubric may name; {response} is required
SCORES = ("yes_probability", "number")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")

DEFAULT_RUBRIC = (
    "You grade answers to math problems.\n\nProblem: {question}\n\nReference answer: {reference}\n\n"
    "Student's answer: {response}\n\nIs the student's final answer equal to the reference answer? "
    "Answer with one word, Yes or No."
)


@dataclass(frozen=True)
class JudgeRubric:
    """What the judge is asked and how its answer becomes a score."""

    rubric: str = DEFAULT_RUBRIC
    score: str = "yes_probability"
    yes: str = "Yes"  # the answer tokens of yes_probability (each must be one token of the judge's tokenizer)
    no: str = "No"
    number_max: float = 10.0  # number: the score is the parsed number / number_max
    max_new_tokens: int = 8  # number: tokens the judge may write
    parse_failure_score: float = 0.0  # number: the score of an answer with no number in range


def rubric_fields(rubric: str) -> list[str]:
    """The placeholders ``rubric`` names, in order.

    >>> rubric_fields("Q: {question} A: {response}")
    ['question', 'response']
    """
    return [name for _, name, _, _ in string.Formatter().parse(rubric) if name is not None]


def rubric_problem(rubric: str, key: str) -> str | None:
    """Why ``rubric`` cannot be filled in (naming ``key``); None when it can."""
    try:
        fields = rubric_fields(rubric)
    except ValueError as exc:
        return f"{key}: not a template ({exc}); write literal braces as {{{{ and }}}}"
    unknown = sorted(set(fields) - set(PLACEHOLDERS))
    if unknown:
        return f"{key}: unknown placeholder(s) {unknown}; a rubric may name {{question}}, {{response}}, {{reference}}"
    if "response" not in fields:
        return f"{key}: the rubric has no {{response}} placeholder, so the judge would never see the answer; add one"
    return None


def fill_rubric(rubric: str, question: str, response: str, reference: str) -> str:
    """The rubric with one row's text in its placeholders."""
    return rubric.format(question=question, response=response, reference=reference)


def judge_prompt_ids(tokenizer: Any, text: str, max_length: int) -> tuple[list[int], bool]:
    """``text`` as the user's turn of the judge's chat template, with the assistant's turn opened; kept to its last
    ``max_length`` tokens (the question to answer sits at the end). Returns the ids and whether they were cut."""
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], tokenize=True, add_generation_prompt=True, return_dict=False
    )
    ids = list(ids)
    return (ids[-max_length:], True) if len(ids) > max_length else (ids, False)


def answer_token_ids(tokenizer: Any, yes: str, no: str) -> tuple[int, int]:
    """The single token ids of ``yes`` and ``no``; ValueError naming the one that is not one token."""
    ids = []
    for name, text in (("yes", yes), ("no", no)):
        tokens = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(tokens) != 1:
            raise ValueError(
                f"reward_model.judge.{name}={text!r} is {len(tokens)} tokens {tokens} of the judge's tokenizer; "
                "yes_probability reads one token: choose a word that is one token (e.g. 'Yes', 'No')"
            )
        ids.append(int(tokens[0]))
    if ids[0] == ids[1]:
        raise ValueError(f"reward_model.judge.yes and .no are the same token ({ids[0]}); give two answers")
    return ids[0], ids[1]


def yes_probability(token: int, log_prob: float, yes_id: int, no_id: int) -> float:
    """P(yes) from the one token chosen between ``yes_id`` and ``no_id`` and its renormalised log-prob.

    >>> round(yes_probability(9, math.log(0.9), 9, 4), 6), round(yes_probability(4, math.log(0.9), 9, 4), 6)
    (0.9, 0.1)
    """
    if token not in (yes_id, no_id):
        raise ValueError(f"the judge answered token {token}, not yes ({yes_id}) or no ({no_id})")
    p = math.exp(min(float(log_prob), 0.0))
    return p if token == yes_id else 1.0 - p


def parse_number(text: str, number_max: float) -> float | None:
    """The first number in ``text`` divided by ``number_max``, or None: no number, or one outside [0, max].

    >>> parse_number("Score: 7/10", 10.0), parse_number("I'd say 12", 10.0), parse_number("good", 10.0)
    (0.7, None, None)
    """
    found = NUMBER.search(text)
    if found is None:
        return None
    value = float(found.group())
    return value / number_max if 0.0 <= value <= number_max else None


def number_scores(texts: Sequence[str], rubric: JudgeRubric) -> tuple[list[float], int]:
    """Each answer's score and how many failed to parse (scored ``rubric.parse_failure_score``).

    >>> number_scores(["8", "none", "10"], JudgeRubric(score="number"))
    ([0.8, 0.0, 1.0], 1)
    """
    parsed = [parse_number(t, rubric.number_max) for t in texts]
    failures = sum(p is None for p in parsed)
    return [rubric.parse_failure_score if p is None else p for p in parsed], failures
