"""The schema of ``reward_model.judge``: what an LLM judge is asked and how its answer is scored
(:mod:`relay.scoring.judge`, whose :class:`~relay.scoring.judge.JudgeRubric` holds the defaults)."""

from __future__ import annotations

from dataclasses import dataclass

from relay.scoring.judge import JudgeRubric

DEFAULT_JUDGE = JudgeRubric()  # one place for the judge's defaults


@dataclass
class JudgeConfig:
    # The user's turn the judge answers; {response} is required, {question} and {reference} (the row's ground
    # truth) are optional. Literal braces are written {{ and }}.
    rubric: str = DEFAULT_JUDGE.rubric
    # yes_probability: P(yes) of the next token, between `yes` and `no` | number: its first number / number_max
    score: str = DEFAULT_JUDGE.score
    yes: str = DEFAULT_JUDGE.yes  # one token of the judge's tokenizer
    no: str = DEFAULT_JUDGE.no  # one token of the judge's tokenizer, not yes's
    number_max: float = DEFAULT_JUDGE.number_max  # number: the answer that scores 1
    max_new_tokens: int = DEFAULT_JUDGE.max_new_tokens  # number: tokens the judge may write
    parse_failure_score: float = DEFAULT_JUDGE.parse_failure_score  # number: an answer with no number in range
