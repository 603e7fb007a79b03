"""The reward role applies reward.overlong_buffer to a training batch's scores, not to its acc, and not to
validation chunks (marked lenient; they carry response lengths for user functions)."""

import numpy as np
import pytest

from relay.config.schema import OverlongBufferConfig, RewardConfig
from relay.data_proto import DataProto
from roles.reward import RewardSettings, RewardWorker


def _worker(**overlong) -> RewardWorker:
    cfg = RewardConfig(workers=0, format_score=0.1, overlong_buffer=OverlongBufferConfig(**overlong))
    return RewardWorker(RewardSettings(cfg, max_response_length=128))


def _batch(with_lengths: bool, validation: bool = False) -> DataProto:
    texts = np.array(["#### 4", "#### 5", "2 + 2 = 4\n#### 4", "no answer"], object)
    batch = {"response_length": np.array([20, 112, 128, 128], np.int32)} if with_lengths else {}
    meta = {"lenient": True} if validation else {}
    return DataProto.from_dict(
        batch=batch, non_tensor={"response_text": texts, "ground_truth": ["4"] * 4}, meta_info=meta
    )


def test_training_batch_scores_lose_the_penalty_acc_does_not() -> None:
    worker = _worker(enable=True, length=32, penalty_factor=1.0)
    out = worker.score(_batch(with_lengths=True))
    np.testing.assert_allclose(out.batch["scores"], [1.0, 0.1 - 0.5, 1.0 - 1.0, -1.0], atol=1e-6)
    np.testing.assert_array_equal(out.batch["acc"], [1.0, 0.0, 1.0, 0.0])
    metrics = out.meta_info["metrics"]
    assert metrics["reward/overlong_frac"] == 0.75 and metrics["reward/overlong_full_frac"] == 0.5
    assert metrics["reward/overlong_penalty_mean"] == pytest.approx(-2.5 / 4)


def test_off_by_default_and_not_in_validation_chunks() -> None:
    off = _worker().score(_batch(with_lengths=True))
    np.testing.assert_allclose(off.batch["scores"], [1.0, 0.1, 1.0, 0.0], atol=1e-6)
    assert "reward/overlong_frac" not in off.meta_info["metrics"]
    val = _worker(enable=True).score(_batch(with_lengths=True, validation=True))
    np.testing.assert_allclose(val.batch["scores"], [1.0, 0.1, 1.0, 0.0], atol=1e-6)


def test_enabled_without_a_budget_is_refused() -> None:
    cfg = RewardConfig(workers=0, overlong_buffer=OverlongBufferConfig(enable=True))
    with pytest.raises(ValueError, match="max_response_length"):
        RewardWorker(RewardSettings(cfg))
