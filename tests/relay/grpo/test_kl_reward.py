"""Golden-value tests for relay.grpo.kl_reward (KL folded into the scores), hand arithmetic in the comments."""

import numpy as np
import pytest

from relay.grpo import grpo_outcome_advantage, kl_penalized_scores
from relay.grpo.advantage import AdvantageOptions

# The docstring's example. Row 1's last token is padding: logp -9, ref 0 would give k1 = -9, k2 = 40.5 and
# k3 = 10 (d = 9, exp(9) - 10 = 8093 clipped to 10), so any leak of the mask would show.
SCORES = np.array([1.0, 0.0])
LOG_PROBS = np.array([[-1.0, -2.0, -3.0], [-0.5, -1.0, -9.0]], np.float32)
REF_LOG_PROBS = np.array([[-2.0, -1.0, -1.0], [-0.5, -2.0, 0.0]], np.float32)
MASK = np.array([[1, 1, 1], [1, 1, 0]], np.int32)
COEF = 0.1


@pytest.mark.parametrize(
    ("kind", "kl", "adjusted"),
    [
        # k1 = logp - ref: row 0 [1, -1, -2] -> -2; row 1 [0, 1] -> 1
        # adjusted: 1 - 0.1 * -2 = 1.2; 0 - 0.1 * 1 = -0.1
        ("k1", [-2.0, 1.0], [1.2, -0.1]),
        # k2 = 0.5 * (logp - ref)^2: row 0 0.5 * [1, 1, 4] -> 3; row 1 0.5 * [0, 1] -> 0.5
        # adjusted: 1 - 0.3 = 0.7; 0 - 0.05 = -0.05
        ("k2", [3.0, 0.5], [0.7, -0.05]),
        # k3 = exp(d) - d - 1 with d = ref - logp: row 0 d = [-1, 1, 2]:
        #   0.3678794 + (2.7182818 - 2) + (7.3890561 - 3) = 0.3678794 + 0.7182818 + 4.3890561 = 5.4752174
        # row 1 d = [0, -1]: 0 + 0.3678794 = 0.3678794
        # adjusted: 1 - 0.5475217 = 0.4524783; 0 - 0.03678794 = -0.03678794
        ("k3", [5.4752174, 0.3678794], [0.4524783, -0.03678794]),
        ("low_var_kl", [5.4752174, 0.3678794], [0.4524783, -0.03678794]),
    ],
)
def test_worked_example_every_kind(kind: str, kl: list[float], adjusted: list[float]) -> None:
    got_adjusted, got_kl = kl_penalized_scores(SCORES, LOG_PROBS, REF_LOG_PROBS, MASK, COEF, kind)
    np.testing.assert_allclose(got_kl, kl, rtol=1e-6)
    np.testing.assert_allclose(got_adjusted, adjusted, rtol=1e-6)
    assert got_adjusted.shape == (2,) and got_kl.shape == (2,)


def test_k3_clipping() -> None:
    # d = ref - logp = [3, -30, 100]: exp(3) - 4 = 16.0855 -> 10; d clipped to -20: 2e-9 + 20 - 1 = 19 -> 10;
    # d clipped to 20: 4.85e8 - 21 -> 10. Sum 30; adjusted 0.5 - 0.01 * 30 = 0.2
    adjusted, kl = kl_penalized_scores(
        np.array([0.5]), np.array([[-4.0, 0.0, -100.0]]), np.array([[-1.0, -30.0, 0.0]]), np.ones((1, 3)), 0.01, "k3"
    )
    np.testing.assert_allclose(kl, [30.0])
    np.testing.assert_allclose(adjusted, [0.2])


def test_zero_coef_leaves_scores_unchanged() -> None:
    adjusted, kl = kl_penalized_scores(SCORES, LOG_PROBS, REF_LOG_PROBS, MASK, 0.0, "k1")
    np.testing.assert_array_equal(adjusted, SCORES)
    np.testing.assert_allclose(kl, [-2.0, 1.0])


def test_feeds_the_group_relative_advantage() -> None:
    # One group of 3, k1 KL per sequence [0, 2, 0] (a single token each), coef 0.1, scores [1, 1, 0]:
    #   adjusted = [1, 1 - 0.2, 0] = [1, 0.8, 0]; mean 0.6 -> mean-only advantages [0.4, 0.2, -0.6]
    logp = np.array([[-1.0], [-1.0], [-1.0]])
    ref = np.array([[-1.0], [-3.0], [-1.0]])
    mask = np.ones((3, 1))
    uids = np.array(["q"] * 3, dtype=object)
    adjusted, kl = kl_penalized_scores(np.array([1.0, 1.0, 0.0]), logp, ref, mask, 0.1, "k1")
    np.testing.assert_allclose(kl, [0.0, 2.0, 0.0])
    np.testing.assert_allclose(adjusted, [1.0, 0.8, 0.0])
    _, seq_adv = grpo_outcome_advantage(adjusted, uids, mask, AdvantageOptions(norm_by_std=False))
    np.testing.assert_allclose(seq_adv, [0.4, 0.2, -0.6], rtol=1e-6)
    # a KL shared by the whole group cancels: every sequence 2 more -> the same advantages
    shared, _ = kl_penalized_scores(np.array([1.0, 1.0, 0.0]), logp, ref - 2.0, mask, 0.1, "k1")
    np.testing.assert_allclose(shared, [0.8, 0.6, -0.2])
    np.testing.assert_allclose(
        grpo_outcome_advantage(shared, uids, mask, AdvantageOptions(norm_by_std=False))[1], seq_adv, atol=1e-6
    )


def test_unknown_kind_and_bad_shapes() -> None:
    with pytest.raises(ValueError, match=r"unknown KL penalty kind 'mse'.*'k1', 'k2', 'k3', 'low_var_kl'"):
        kl_penalized_scores(SCORES, LOG_PROBS, REF_LOG_PROBS, MASK, COEF, "mse")
    with pytest.raises(ValueError, match=r"expected scores \[B\]"):
        kl_penalized_scores(SCORES, LOG_PROBS, REF_LOG_PROBS[:, :2], MASK, COEF, "k1")
    with pytest.raises(ValueError, match=r"expected scores \[B\]"):
        kl_penalized_scores(np.array([1.0, 0.0, 0.5]), LOG_PROBS, REF_LOG_PROBS, MASK, COEF, "k1")
