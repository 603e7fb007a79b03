"""The reward_model worker built in-process: its scores are the classifier's, row by row, with its metrics."""

from __future__ import annotations

import numpy as np
import pytest

from relay.data_proto import DataProto
from relay.models.tiny import build_tiny_classifier
from roles.reward_model import RewardModelWorker
from roles.reward_model_settings import RewardModelSettings


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    path = build_tiny_classifier("qwen2", tmp_path_factory.mktemp("rm-qwen2"), seed=5)
    return RewardModelWorker(RewardModelSettings(str(path), micro_batch_size=2, max_length=48))


def _rows(questions: list[str], responses: list[str]) -> DataProto:
    non_tensor = {"question": np.array(questions, dtype=object), "response_text": np.array(responses, dtype=object)}
    return DataProto.from_dict(non_tensor=non_tensor)


def test_scores_are_the_classifiers_row_by_row(worker) -> None:
    from relay.scoring.reward_model import classifier_batch, classifier_scores

    questions, responses = ["2 + 3?", "4 + 4?", "9 - 1?"], ["5", "#### 8", "It is " + "eight " * 40]
    out = worker.score(_rows(questions, responses), step=0)
    alone = [classifier_scores(worker.scorer.model, classifier_batch(worker.scorer.tokenizer, [q], [r], 48), 1)[0]
             for q, r in zip(questions, responses, strict=True)]  # fmt: skip
    np.testing.assert_allclose(out.batch["rm_scores"], alone, rtol=1e-5, atol=1e-6)
    metrics = out.meta_info["metrics"]
    assert metrics["reward_model/truncated"] == 1.0  # the long third conversation, scored on its end
    assert metrics["reward_model/score_mean"] == pytest.approx(float(np.mean(alone)), abs=1e-6)
    assert metrics["timing/reward_model_compute"] > 0
    assert worker.ready()["role"] == "reward_model"


def test_a_kind_it_cannot_score_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="reward_model.kind=.ranker."):
        RewardModelWorker(RewardModelSettings(str(tmp_path), kind="ranker"))
