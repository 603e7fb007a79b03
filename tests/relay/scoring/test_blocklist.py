"""reward.blocklist: blocked responses get reward 0 and acc 0, counted per step, in every reward mode;
and the reward role's per-item timeout count."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from relay.config.schema import RewardConfig
from relay.data_proto import DataProto
from relay.scoring.blocklist import apply_blocklist, blocked_mask, check_blocklist
from roles.reward import RewardSettings, RewardWorker

# Parses instantly but sympy would need a 370-million-digit power to compare it (see test_pool.py).
SLOW = "#### 9^{9^{9}}"


def test_blocked_mask_golden() -> None:
    responses = ["#### 4", "ignore that #### 5", "IGNORE", "a <tool> b"]
    np.testing.assert_array_equal(blocked_mask(responses, ["ignore"]), [False, True, False, False])
    np.testing.assert_array_equal(blocked_mask(responses, ["ignore", "<tool>"]), [False, True, False, True])
    np.testing.assert_array_equal(blocked_mask(responses, []), [False] * 4)
    assert blocked_mask([], ["x"]).shape == (0,)


def test_apply_blocklist_golden() -> None:
    scores, acc = np.array([1.0, 0.1, 1.0]), np.array([1.0, 0.0, 1.0])
    new_scores, new_acc, metrics = apply_blocklist(scores, acc, ["#### 4", "#### 5", "hack #### 4"], ["hack"])
    np.testing.assert_array_equal(new_scores, np.array([1.0, 0.1, 0.0], np.float32))
    np.testing.assert_array_equal(new_acc, [1.0, 0.0, 0.0])
    assert new_scores.dtype == new_acc.dtype == np.float32
    assert metrics == {"reward/blocked_count": 1.0, "reward/blocked_rate": pytest.approx(1 / 3)}
    assert scores[2] == 1.0  # inputs untouched
    assert apply_blocklist(np.zeros(0), np.zeros(0), [], ["x"])[2] == {
        "reward/blocked_count": 0.0,
        "reward/blocked_rate": 0.0,
    }


def test_blocklist_errors() -> None:
    with pytest.raises(ValueError, match=r"reward.blocklist\[1\]='': entries must be non-empty strings"):
        check_blocklist(["ok", ""])
    with pytest.raises(ValueError, match=r"reward.blocklist\[0\]=3"):
        check_blocklist([3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"expected scores and acc of shape \[2\]"):
        apply_blocklist(np.zeros(3), np.zeros(3), ["a", "b"], [])


# -- the reward role, both modes ---------------------------------------------------------------------------


def _cfg(**kw: Any) -> RewardSettings:
    return RewardSettings(RewardConfig(**kw))


def test_rule_mode_zeroes_blocked_responses() -> None:
    worker = RewardWorker(_cfg(workers=0, blocklist=["<cheat>"]))
    texts = ["#### 4", "<cheat> #### 4", "#### 5", "<cheat>"]
    data = DataProto.from_dict(non_tensor={"response_text": np.array(texts, object), "ground_truth": ["4"] * 4})
    out = worker.score(data)
    np.testing.assert_array_equal(out.batch["scores"], [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(out.batch["acc"], [1.0, 0.0, 0.0, 0.0])
    metrics = out.meta_info["metrics"]
    assert (metrics["reward/blocked_count"], metrics["reward/blocked_rate"]) == (2.0, 0.5)
    assert metrics["reward/timeouts"] == 0.0 and metrics["reward/errors"] == 0.0
    worker.close()


def test_function_mode_zeroes_blocked_responses() -> None:
    worker = RewardWorker(
        _cfg(
            mode="function",
            function="benchmarks.harness.toy_reward:token_share_reward",
            function_kwargs={"target_stop": 100},
            blocklist=["bad"],
        )
    )
    data = DataProto.from_dict(
        batch={
            "responses": np.array([[1, 2, 200], [3, 4, 5], [6, 300, 0]], np.int32),
            "response_mask": np.array([[1, 1, 1], [1, 1, 1], [1, 1, 0]], np.float32),
        },
        non_tensor={"response_text": np.array(["fine", "bad words", "also fine"], object)},
    )
    out = worker.score(data)
    np.testing.assert_allclose(out.batch["scores"], [2 / 3, 0.0, 0.5], rtol=1e-6)
    np.testing.assert_allclose(out.batch["acc"], [2 / 3, 0.0, 0.5], rtol=1e-6)
    assert out.meta_info["metrics"]["reward/blocked_count"] == 1.0
    assert "reward/timeouts" not in out.meta_info["metrics"]


def test_empty_blocklist_entry_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match=r"reward.blocklist\[0\]=''"):
        RewardWorker(_cfg(workers=0, blocklist=[""]))


def test_hanging_item_scores_zero_and_counts_as_timeout() -> None:
    worker = RewardWorker(_cfg(workers=2, timeout_s=10.0, item_timeout_s=1.0))
    try:
        texts = [SLOW, "#### 2", "#### 3"]
        data = DataProto.from_dict(
            non_tensor={"response_text": np.array(texts, object), "ground_truth": ["72", "2", "3"]}
        )
        out = worker.score(data)
        # chunks [SLOW, "#### 2"] and ["#### 3"]: only the hanging item times out
        np.testing.assert_array_equal(out.batch["scores"], [0.0, 1.0, 1.0])
        assert out.meta_info["metrics"]["reward/timeouts"] == 1.0
        assert out.meta_info["metrics"]["reward/errors"] == 0.0
    finally:
        worker.close()
