"""The driver's advantage phase: group-relative advantages, with and without KL in the reward."""

import numpy as np
import pytest

from driver.collect import advantage_phase
from relay.config import load_config
from relay.data_proto import DataProto


def _batch() -> DataProto:
    # two groups of two; response widths 2, second token of row 1 is padding
    return DataProto.from_dict(
        batch={
            "scores": np.array([1.0, 0.0, 1.0, 1.0], np.float32),
            "response_mask": np.array([[1, 1], [1, 0], [1, 1], [1, 1]], np.float32),
            "rollout_log_probs": np.array([[-1.0, -2.0], [-1.0, -9.0], [-0.5, -0.5], [-1.0, -1.0]], np.float32),
            "ref_log_probs": np.array([[-1.5, -2.0], [-1.0, -1.0], [-1.0, -1.0], [-1.0, -1.0]], np.float32),
        },
        non_tensor={"uid": np.array(["a", "a", "b", "b"], dtype=object)},
    )


def test_plain_grpo_advantages() -> None:
    cfg = load_config(environ={}).cfg
    out, m = advantage_phase(_batch(), cfg)
    adv = out.batch["advantages"]
    # group a: scores 1, 0 -> mean 0.5, sample std 0.7071 -> +-0.7071; group b: equal scores -> 0
    np.testing.assert_allclose(adv[:, 0], [0.70710, -0.70710, 0.0, 0.0], atol=1e-4)
    assert adv[1, 1] == 0.0 and m["advantage/zero_groups_frac"] == 0.5 and "reward/kl_penalty_mean" not in m


def test_kl_in_reward_penalises_before_the_group_normalisation() -> None:
    cfg = load_config(
        overrides=["algorithm.use_kl_in_reward=true", "algorithm.kl_coef=0.5", "algorithm.kl_loss_type=k1"],
        environ={},
    ).cfg
    out, m = advantage_phase(_batch(), cfg)
    # k1 per token = rollout - ref on response tokens: row0 0.5 + 0 = 0.5; row1 0 (pad ignored);
    # row2 0.5 + 0.5 = 1.0; row3 0. Scores - 0.5 * kl: [0.75, 0.0, 0.5, 1.0]
    assert m["reward/penalized_mean"] == pytest.approx((0.75 + 0.0 + 0.5 + 1.0) / 4)
    assert m["reward/kl_penalty_mean"] == pytest.approx(0.5 * (0.5 + 0 + 1.0 + 0) / 4)
    adv = out.batch["advantages"][:, 0]
    # group b is no longer tied: 0.5 vs 1.0 -> -0.7071, +0.7071; group a keeps its order
    np.testing.assert_allclose(adv, [0.70710, -0.70710, -0.70710, 0.70710], atol=1e-4)


def test_adaptive_kl_controller_moves_the_coefficient_after_each_batch() -> None:
    from relay.grpo.kl_controller import KLController

    cfg = load_config(
        overrides=[
            "algorithm.use_kl_in_reward=true",
            "algorithm.kl_coef=0.5",
            "algorithm.kl_loss_type=k1",
            "algorithm.kl_ctrl.type=adaptive",
            "algorithm.kl_ctrl.target_kl=0.1",
            "algorithm.kl_ctrl.horizon=100",
        ],
        environ={},
    ).cfg
    control = KLController.from_config(cfg.algorithm)
    _, m = advantage_phase(_batch(), cfg, control)
    # per-token KL: (0.5 + 0 + 1.0 + 0) over 7 response tokens = 0.2143 > 0.1: error clipped to 0.2,
    # coefficient 0.5 * (1 + 0.2 * 4 / 100) = 0.504 for the next batch; this batch was penalised with 0.5
    assert m["reward/kl_coef"] == 0.5 and m["reward/kl_per_token"] == pytest.approx(1.5 / 7)
    assert control.value == pytest.approx(0.504)
    _, m = advantage_phase(_batch(), cfg, control)
    assert m["reward/kl_coef"] == pytest.approx(0.504)


def test_kl_in_reward_reads_the_old_log_probs_when_the_batch_has_no_rollout_ones() -> None:
    cfg = load_config(
        overrides=["algorithm.use_kl_in_reward=true", "algorithm.kl_coef=0.5", "algorithm.kl_loss_type=k1"],
        environ={},
    ).cfg
    batch = _batch()
    old = batch.batch.pop("rollout_log_probs") + np.float32(1.0)  # one nat above: k1 is 1 more per token
    batch = batch.union(DataProto.from_dict(batch={"old_log_probs": old}))
    _, m = advantage_phase(batch, cfg)
    # k1 = old - ref per response token, summed per row: 1.5 + 1.0, 1.0 (pad ignored), 1.5 + 1.5, 1.0 + 1.0
    assert m["reward/kl_per_token"] == pytest.approx(8.5 / 7)
    assert m["reward/kl_penalty_mean"] == pytest.approx(0.5 * (2.5 + 1.0 + 3.0 + 2.0) / 4)
