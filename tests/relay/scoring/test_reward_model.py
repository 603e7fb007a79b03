"""A classifier reward model's scores: exactly what transformers computes on each conversation alone, whatever the
padding of the batch, in every supported architecture's shape."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from relay.models.tiny import build_tiny_classifier
from relay.scoring.reward_model import (
    classifier_batch,
    classifier_problem,
    classifier_scores,
    conversation,
    last_token_positions,
)

QUESTIONS = ["What is 2 + 3?", "Natalia sold clips to 48 of her friends in April. How many?", "What is 7 times 6?"]
RESPONSES = ["5", "She sold 48 clips, then half as many in May: 48 + 24 = 72. #### 72", "7 times 6 is 42. #### 42"]


@pytest.fixture(scope="module", params=["llama", "qwen2", "qwen3"])
def classifier(request, tmp_path_factory):
    path = build_tiny_classifier(request.param, tmp_path_factory.mktemp(f"rm-{request.param}"), seed=3)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path, dtype=torch.float32).eval()
    return path, tokenizer, model


def _alone(model, tokenizer, question: str, response: str) -> float:
    """transformers' own score of one unpadded conversation: with no pad id it reads the last token."""
    text = tokenizer.apply_chat_template(conversation(question, response), tokenize=False)
    ids = torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"]])
    saved, model.config.pad_token_id = model.config.pad_token_id, None
    try:
        with torch.no_grad():
            return float(model(input_ids=ids).logits[0, 0])
    finally:
        model.config.pad_token_id = saved


def test_batched_scores_are_transformers_scores_of_each_conversation_alone(classifier) -> None:
    _, tokenizer, model = classifier
    batch = classifier_batch(tokenizer, QUESTIONS, RESPONSES, max_length=512)
    assert batch.truncated == 0 and len(set(batch.attention_mask.sum(axis=1))) == 3  # three lengths, right-padded
    want = [_alone(model, tokenizer, q, r) for q, r in zip(QUESTIONS, RESPONSES, strict=True)]
    for micro_batch in (1, 2, 3):  # a forward's width is its own longest row
        got = classifier_scores(model, batch, micro_batch)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert np.std(want) > 0  # the rows score differently: a misread position would show


def test_the_score_is_read_at_the_last_real_token_where_the_pad_id_rule_reads_early(classifier) -> None:
    """SmolLM2 pads with <|im_end|>: a conversation whose last token is <|im_end|> is read one token early by
    transformers' pooling (the rightmost token that is not the pad id), and at its end here."""
    _, tokenizer, model = classifier
    assert tokenizer.pad_token_id == tokenizer.convert_tokens_to_ids("<|im_end|>")
    text = tokenizer.apply_chat_template(conversation(QUESTIONS[0], RESPONSES[0]), tokenize=False).rstrip("\n")
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert ids[-1] == tokenizer.pad_token_id
    batch = classifier_batch.__globals__["ClassifierBatch"](np.array([ids]), np.ones((1, len(ids)), np.int64), 0)
    ours = classifier_scores(model, batch, 1)[0]
    with torch.no_grad():
        pooled = float(model(input_ids=torch.tensor([ids])).logits[0, 0])  # the pad-id rule
        hidden = model.model(input_ids=torch.tensor([ids])).last_hidden_state
        at_end, one_early = (float(model.score(hidden[0, i])[0]) for i in (-1, -2))
    assert ours == pytest.approx(at_end, abs=1e-6)
    assert pooled == pytest.approx(one_early, abs=1e-6) and pooled != pytest.approx(ours, abs=1e-6)


def test_a_long_conversation_keeps_its_end_and_is_counted(classifier) -> None:
    _, tokenizer, _ = classifier
    long_response = "word " * 300 + "#### 5"
    full = classifier_batch(tokenizer, [QUESTIONS[0]], [long_response], max_length=4096)
    cut = classifier_batch(tokenizer, [QUESTIONS[0]], [long_response], max_length=64)
    assert cut.truncated == 1 and full.truncated == 0 and cut.input_ids.shape == (1, 64)
    np.testing.assert_array_equal(cut.input_ids[0], full.input_ids[0, -64:])


def test_positions_and_an_empty_row() -> None:
    assert last_token_positions(np.array([[1, 1, 0], [1, 1, 1]])).tolist() == [1, 2]
    with pytest.raises(ValueError, match="no token"):
        last_token_positions(np.array([[1, 0], [0, 0]]))


def test_only_a_one_label_sequence_classifier_is_a_reward_model(classifier, tiny_model_dir) -> None:
    path, _, _ = classifier
    assert classifier_problem(json.loads((path / "config.json").read_text()), "reward_model.path") is None
    causal = classifier_problem(json.loads((tiny_model_dir / "config.json").read_text()), "reward_model.path=X")
    assert causal.startswith("reward_model.path=X: the checkpoint's architectures are ['LlamaForCausalLM']")
    two = classifier_problem({"architectures": ["LlamaForSequenceClassification"], "id2label": {0: "a", 1: "b"}}, "k")
    assert "2 labels" in two and "num_labels=1" in two
