"""The reward_model role's judge built in-process on a tiny random Llama: P(yes) is the two-token softmax that
transformers computes directly at the prompt's last position, the same from the vLLM and the transformers engine;
a number judge's parse failures are counted."""

from __future__ import annotations

import numpy as np
import pytest

from relay.data_proto import DataProto
from relay.scoring.judge import JudgeRubric, fill_rubric, judge_prompt_ids, number_scores
from roles.reward_model import RewardModelWorker
from roles.reward_model_settings import RewardModelSettings

RUBRIC = JudgeRubric(rubric="Question: {question}\nAnswer: {response}\nReference: {reference}\nCorrect? Yes or No.")
QUESTIONS = ["2 + 3?", "4 + 4?", "9 - 1?"]
RESPONSES = ["5", "#### 8", "It is seven"]
TRUTHS = ["5", "8", "8"]


def _rows() -> DataProto:
    non_tensor = {
        "question": np.array(QUESTIONS, dtype=object),
        "response_text": np.array(RESPONSES, dtype=object),
        "ground_truth": np.array(TRUTHS, dtype=object),
    }
    return DataProto.from_dict(non_tensor=non_tensor)


def _direct_p_yes(path, rubric: JudgeRubric) -> np.ndarray:
    """P(yes) computed with transformers alone: the last prompt position's logits, softmax over yes and no."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    yes, no = (tok(t, add_special_tokens=False)["input_ids"][0] for t in (rubric.yes, rubric.no))
    out = []
    for q, r, t in zip(QUESTIONS, RESPONSES, TRUTHS, strict=True):
        ids, _ = judge_prompt_ids(tok, fill_rubric(rubric.rubric, q, r, t), 256)
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
        out.append(float(torch.softmax(logits[[yes, no]].double(), dim=0)[0]))
    return np.asarray(out)


def _judge(path, engine: str, rubric: JudgeRubric = RUBRIC) -> RewardModelWorker:
    settings = RewardModelSettings(str(path), kind="judge", micro_batch_size=2, max_length=256, engine=engine,
                                   judge=rubric)  # fmt: skip
    return RewardModelWorker(settings)


def test_hf_judge_scores_p_yes_as_transformers_computes_it(tiny_model_dir) -> None:
    out = _judge(tiny_model_dir, "hf").score(_rows(), step=0)
    expected = _direct_p_yes(tiny_model_dir, RUBRIC)
    np.testing.assert_allclose(out.batch["rm_scores"], expected, rtol=0, atol=1e-5)
    assert len(set(np.round(expected, 4))) == 3  # three different conversations, three different scores
    metrics = out.meta_info["metrics"]
    assert metrics["reward_model/judge_parse_failures"] == 0.0
    assert metrics["reward_model/score_mean"] == pytest.approx(float(expected.mean()), abs=1e-5)


def test_vllm_judge_scores_the_same_p_yes(tiny_model_dir) -> None:
    out = _judge(tiny_model_dir, "vllm").score(_rows(), step=0)
    np.testing.assert_allclose(out.batch["rm_scores"], _direct_p_yes(tiny_model_dir, RUBRIC), rtol=0, atol=1e-4)


def test_number_judge_scores_its_greedy_answers_and_counts_failures(tiny_model_dir) -> None:
    from transformers import AutoTokenizer

    rubric = JudgeRubric(rubric="Rate this answer 0-10: {response}", score="number", max_new_tokens=4)
    worker = _judge(tiny_model_dir, "hf", rubric)
    out = worker.score(_rows(), step=0)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    scorer = worker.scorer
    prompts, _ = scorer.prompts(QUESTIONS, RESPONSES, TRUTHS)
    from relay.engines.base import SamplingSettings

    greedy = scorer.engine.generate(prompts, SamplingSettings(n=1, max_new_tokens=4, temperature=0.0))
    texts = [tok.decode(g[0].token_ids, skip_special_tokens=True) for g in greedy]
    scores, failures = number_scores(texts, rubric)
    np.testing.assert_allclose(out.batch["rm_scores"], scores)
    assert out.meta_info["metrics"]["reward_model/judge_parse_failures"] == float(failures)
    assert failures == 3  # a random model writes no number: every answer fails and is counted, scored 0
