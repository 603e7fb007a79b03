"""Golden values for RLOO and the REINFORCE++ estimators (computed by hand from the papers' formulas, in comments),
and the config's list of estimators against the registry."""

import numpy as np
import pytest

from relay.grpo import ADVANTAGE_ESTIMATORS, get_advantage_estimator, masked_whiten
from relay.grpo.advantage import AdvantageOptions
from relay.grpo.reinforce import discounted_returns


def _uids(*names: str) -> np.ndarray:
    return np.array(names, dtype=object)


def test_config_choices_are_the_registry() -> None:
    from relay.config import ConfigError, load_config

    with pytest.raises(ConfigError) as refused:
        load_config(overrides=["algorithm.adv_estimator=gae"], environ={})
    lines = [line.strip() for line in str(refused.value).splitlines()]
    assert f"algorithm.adv_estimator='gae': must be one of {', '.join(ADVANTAGE_ESTIMATORS)}" in lines
    assert {"reinforce_plus_plus", "reinforce_plus_plus_baseline"} <= set(ADVANTAGE_ESTIMATORS)


def test_rloo_leave_one_out_golden() -> None:
    # sample 0: others (0, 0, 1) average 1/3 -> 1 - 1/3 = 2/3; sample 1: others (1, 0, 1) average 2/3 -> -2/3
    # group b (3, 1): 3 - 1 = 2, 1 - 3 = -2; a lone sample gets 0
    rloo = get_advantage_estimator("rloo")
    scores = np.array([1.0, 0.0, 0.0, 1.0, 3.0, 1.0, 5.0])
    mask = np.array([[1, 1]] * 6 + [[1, 0]])
    token, seq = rloo(scores, _uids("a", "a", "a", "a", "b", "b", "c"), mask, AdvantageOptions(norm_by_std=True))
    np.testing.assert_allclose(seq, [2 / 3, -2 / 3, -2 / 3, 2 / 3, 2.0, -2.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(token[:, 0], seq, atol=1e-6)
    assert token[6, 1] == 0.0


def test_masked_whiten_golden() -> None:
    # masked 1, 1, 0: mean 2/3, unbiased variance ((1/3)^2 * 2 + (2/3)^2) / 2 = 1/3, std 0.57735
    out = masked_whiten(np.array([[1.0, 1.0], [0.0, 9.0]]), np.array([[1, 1], [1, 0]]))
    np.testing.assert_allclose(out, [[0.57735, 0.57735], [-1.1547, 0.0]], atol=1e-5)
    np.testing.assert_array_equal(masked_whiten(np.array([[4.0]]), np.array([[1]])), [[0.0]])  # one token: centred


def test_discounted_returns_golden() -> None:
    # score 1 at the last of 3 tokens, gamma 0.5: 0.25, 0.5, 1; score 2 over 1 token: 2 then padding
    out = discounted_returns(np.array([1.0, 2.0]), np.array([[1, 1, 1], [1, 0, 0]]), 0.5)
    np.testing.assert_allclose(out, [[0.25, 0.5, 1.0], [2.0, 0.0, 0.0]])


def test_reinforce_plus_plus_golden() -> None:
    # returns [[1, 1], [0, pad]] whitened: mean 2/3, std sqrt(1/3) -> 0.57735, 0.57735, -1.1547
    rpp = get_advantage_estimator("reinforce_plus_plus")
    token, seq = rpp(np.array([1.0, 0.0]), _uids("a", "a"), np.array([[1, 1], [1, 0]]), AdvantageOptions(gamma=1.0))
    np.testing.assert_allclose(token, [[0.57735, 0.57735], [-1.1547, 0.0]], atol=1e-5)
    np.testing.assert_allclose(seq, [0.57735, -1.1547], atol=1e-5)
    # gamma 0.5: returns [0.5, 1 | 0]: mean 0.5, variance (0 + 0.25 + 0.25) / 2 = 0.25 -> [0, 1 | -1]
    token, _ = rpp(np.array([1.0, 0.0]), _uids("a", "a"), np.array([[1, 1], [1, 0]]), AdvantageOptions(gamma=0.5))
    np.testing.assert_allclose(token, [[0.0, 1.0], [-1.0, 0.0]], atol=1e-6)


def test_reinforce_plus_plus_baseline_golden() -> None:
    # group a [1, 0] centred [0.5, -0.5], group b [1, 1] centred [0, 0]; one token each: mean 0, unbiased
    # variance (0.25 + 0.25) / 3 = 1/6, std 0.408248 -> [1.224745, -1.224745, 0, 0]
    rppb = get_advantage_estimator("reinforce_plus_plus_baseline")
    token, seq = rppb(np.array([1.0, 0.0, 1.0, 1.0]), _uids("a", "a", "b", "b"), np.ones((4, 1)))
    np.testing.assert_allclose(seq, [1.224745, -1.224745, 0.0, 0.0], atol=1e-5)
    np.testing.assert_allclose(token[:, 0], seq)


def test_remax_golden() -> None:
    # greedy scored 1: samples [1, 0, 0, 1] -> [0, -1, -1, 0]; another prompt's greedy scored 0: [1, 0] -> [1, 0]
    remax = get_advantage_estimator("remax")
    scores, baselines = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 0.0]), np.array([1.0, 1.0, 1.0, 1.0, 0.0, 0.0])
    token, seq = remax(scores, _uids(*"aaaabb"), np.ones((6, 2)), AdvantageOptions(baselines=baselines))
    np.testing.assert_array_equal(seq, [0.0, -1.0, -1.0, 0.0, 1.0, 0.0])
    np.testing.assert_array_equal(token[:, 1], seq)
    with pytest.raises(ValueError, match=r"remax needs baselines \[B\]"):
        remax(scores, _uids(*"aaaabb"), np.ones((6, 2)))


@pytest.mark.parametrize("name", sorted(ADVANTAGE_ESTIMATORS))
def test_every_estimator_gives_zero_on_padding_and_float32(name: str) -> None:
    mask = np.array([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0]])
    baselines = np.array([1.0, 1.0, 0.0, 0.0]) if name == "remax" else None
    options = AdvantageOptions(norm_by_std=True, gamma=0.9, baselines=baselines)
    token, seq = get_advantage_estimator(name)(np.array([1.0, 0.0, 0.5, 0.0]), _uids("a", "a", "b", "b"), mask, options)
    assert token.dtype == np.float32 and seq.dtype == np.float32 and token.shape == mask.shape
    assert np.all(token[mask == 0] == 0) and np.all(np.isfinite(token))
