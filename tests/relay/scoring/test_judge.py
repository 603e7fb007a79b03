"""The judge's pure parts: rubrics, answer tokens, P(yes) from one renormalised log-prob, number parsing."""

from __future__ import annotations

import math

import pytest

from relay.scoring.judge import (
    DEFAULT_RUBRIC,
    JudgeRubric,
    answer_token_ids,
    fill_rubric,
    judge_prompt_ids,
    number_scores,
    parse_number,
    rubric_problem,
    yes_probability,
)


def test_p_yes_from_either_answer_is_the_two_token_softmax() -> None:
    logit_yes, logit_no = 1.3, -0.4  # golden: softmax over the two allowed tokens
    p_yes = math.exp(logit_yes) / (math.exp(logit_yes) + math.exp(logit_no))
    assert yes_probability(7, math.log(p_yes), yes_id=7, no_id=3) == pytest.approx(p_yes, abs=1e-12)
    assert yes_probability(3, math.log(1 - p_yes), yes_id=7, no_id=3) == pytest.approx(p_yes, abs=1e-12)
    assert yes_probability(7, 1e-9, 7, 3) == 1.0  # a log-prob rounded above 0 is a certainty, not > 1
    with pytest.raises(ValueError, match="not yes"):
        yes_probability(5, -0.1, 7, 3)


def test_numbers_parse_in_range_and_failures_are_counted() -> None:
    assert parse_number("8.5 out of 10", 10.0) == 0.85
    assert parse_number("-1", 10.0) is None  # below the range
    rubric = JudgeRubric(score="number", number_max=5.0, parse_failure_score=-1.0)
    assert number_scores(["5", "3 stars", "", "9"], rubric) == ([1.0, 0.6, -1.0, -1.0], 2)


@pytest.mark.parametrize(
    ("rubric", "found"),
    [
        ("Grade: {response}", None),
        ("Grade {question}", "no {response} placeholder"),
        ("{response} vs {answer}", "unknown placeholder(s) ['answer']"),
        ("{response} {", "not a template"),
    ],
)
def test_rubric_problems_name_the_key_and_the_fix(rubric: str, found: str | None) -> None:
    problem = rubric_problem(rubric, "reward_model.judge.rubric")
    if found is None:
        assert problem is None
    else:
        assert problem is not None and found in problem and problem.startswith("reward_model.judge.rubric")


def test_the_default_rubric_fills_every_placeholder() -> None:
    text = fill_rubric(DEFAULT_RUBRIC, "2 + 2?", "#### 4", "4")
    assert "2 + 2?" in text and "#### 4" in text and "Reference answer: 4" in text and "{" not in text


def test_prompts_open_the_assistant_turn_and_keep_their_end(tiny_model_dir) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    ids, cut = judge_prompt_ids(tok, "Is 2 + 2 = 4? Answer Yes or No.", 512)
    text = tok.decode(ids)
    assert not cut and text.endswith("<|im_start|>assistant\n") and "Is 2 + 2 = 4?" in text
    short, cut = judge_prompt_ids(tok, "Is 2 + 2 = 4? Answer Yes or No.", 8)
    assert cut and short == ids[-8:]
    yes, no = answer_token_ids(tok, "Yes", "No")
    assert tok.decode([yes]) == "Yes" and tok.decode([no]) == "No"
    with pytest.raises(ValueError, match="reward_model.judge.yes='Absolutely yes' is"):
        answer_token_ids(tok, "Absolutely yes", "No")
