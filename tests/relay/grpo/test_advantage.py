"""Golden-value tests for relay.grpo.advantage (values computed by hand in the comments)."""

import numpy as np
import pytest

from relay.grpo import (
    ADVANTAGE_ESTIMATORS,
    AdvantageOptions,
    get_advantage_estimator,
    grpo_outcome_advantage,
    register_advantage,
)


def _uids(*names: str) -> np.ndarray:
    return np.array(names, dtype=object)


def test_one_group_worked_example() -> None:
    # mean = 0.5; sample var = 4 * 0.25 / 3 = 1/3; std = 0.5773503
    # A = +-0.5 / (0.5773503 + 1e-6) = +-0.8660239
    scores = np.array([1.0, 0.0, 0.0, 1.0])
    mask = np.ones((4, 2), dtype=np.int32)
    token_adv, seq_adv = grpo_outcome_advantage(scores, _uids("q", "q", "q", "q"), mask)
    np.testing.assert_allclose(seq_adv, [0.8660239, -0.8660239, -0.8660239, 0.8660239], atol=1e-6)
    np.testing.assert_allclose(token_adv, np.repeat(seq_adv[:, None], 2, axis=1), atol=1e-7)
    assert token_adv.dtype == np.float32 and seq_adv.dtype == np.float32


def test_two_interleaved_groups_and_mask() -> None:
    # group a (rows 0, 2, 4): scores [1, 0, 0], mean 1/3, var = (4/9 + 1/9 + 1/9) / 2 = 1/3, std 0.5773503
    #   A = (2/3) / (0.5773503 + 1e-6) = 1.1546985, (-1/3) / (0.5773503 + 1e-6) = -0.5773493
    # group b (rows 1, 3, 5): scores [2, 4, 6], mean 4, var = (4 + 0 + 4) / 2 = 4, std 2
    #   A = -2 / (2 + 1e-6) = -0.9999995, 0, +0.9999995
    scores = np.array([1.0, 2.0, 0.0, 4.0, 0.0, 6.0])
    uids = _uids("a", "b", "a", "b", "a", "b")
    mask = np.array([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 1], [0, 0, 0], [1, 1, 0]])
    token_adv, seq_adv = grpo_outcome_advantage(scores, uids, mask)
    expected = np.array([1.1546985, -0.9999995, -0.5773493, 0.0, -0.5773493, 0.9999995])
    np.testing.assert_allclose(seq_adv, expected, atol=1e-6)
    np.testing.assert_allclose(token_adv, expected[:, None] * mask, atol=1e-6)
    assert token_adv[0, 2] == 0.0 and not token_adv[4].any()


def test_group_of_size_one_gets_zero() -> None:
    # x alone -> 0 (no baseline, ddof=1 std undefined); y: [1, 0], mean 0.5, std sqrt(0.5) = 0.7071068
    #   A = +-0.5 / 0.7071068 = +-0.7071058 (with epsilon 1e-6: 0.5 / 0.7071078 = 0.7071058)
    _, seq_adv = grpo_outcome_advantage(np.array([5.0, 1.0, 0.0]), _uids("x", "y", "y"), np.ones((3, 1)))
    assert np.isfinite(seq_adv).all()
    np.testing.assert_allclose(seq_adv, [0.0, 0.7071058, -0.7071058], atol=1e-6)


def test_equal_scores_give_zero_not_nan() -> None:
    # std = 0 -> A = 0 / (0 + 1e-6) = 0 (up to float rounding of the mean: 1e-16 / 1e-6 = 1e-10)
    _, seq_adv = grpo_outcome_advantage(np.array([0.7, 0.7, 0.7]), _uids("q", "q", "q"), np.ones((3, 4)))
    np.testing.assert_allclose(seq_adv, [0.0, 0.0, 0.0], atol=1e-9)


def test_norm_by_std_false_only_centers() -> None:
    # group a: [1, 0, 0, 1], mean 0.5 -> +-0.5; group b: [2, 4, 6], mean 4 -> -2, 0, 2
    scores = np.array([1.0, 0.0, 0.0, 1.0, 2.0, 4.0, 6.0])
    uids = _uids("a", "a", "a", "a", "b", "b", "b")
    _, seq_adv = grpo_outcome_advantage(scores, uids, np.ones((7, 1)), AdvantageOptions(norm_by_std=False))
    np.testing.assert_allclose(seq_adv, [0.5, -0.5, -0.5, 0.5, -2.0, 0.0, 2.0], atol=1e-7)


def test_non_string_uids() -> None:
    # uids only need to be hashable; group 7: [3, 1] -> mean 2 -> +-1 when not normalised
    _, seq_adv = grpo_outcome_advantage(
        np.array([3.0, 1.0]), np.array([7, 7], dtype=object), np.ones((2, 1)), AdvantageOptions(norm_by_std=False)
    )
    np.testing.assert_allclose(seq_adv, [1.0, -1.0])


@pytest.mark.parametrize(
    ("scores", "uids", "mask"),
    [
        (np.zeros((2, 1)), _uids("a", "a"), np.ones((2, 3))),  # scores not 1-D
        (np.zeros(2), _uids("a", "a", "a"), np.ones((2, 3))),  # uids too long
        (np.zeros(2), _uids("a", "a"), np.ones((3, 3))),  # mask too long
        (np.zeros(2), _uids("a", "a"), np.ones(2)),  # mask not 2-D
    ],
)
def test_shape_errors(scores: np.ndarray, uids: np.ndarray, mask: np.ndarray) -> None:
    with pytest.raises(ValueError, match="expected scores"):
        grpo_outcome_advantage(scores, uids, mask)


def test_registry_lookup() -> None:
    assert ADVANTAGE_ESTIMATORS["grpo"] is grpo_outcome_advantage
    assert get_advantage_estimator("grpo") is grpo_outcome_advantage


def test_registry_unknown_name_lists_valid_names() -> None:
    with pytest.raises(ValueError, match=r"unknown advantage estimator 'gae'.*'grpo'"):
        get_advantage_estimator("gae")


def test_register_new_and_duplicate() -> None:
    def fake(*args: object, **kwargs: object) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((0, 0)), np.zeros(0)

    try:
        assert register_advantage("test_fake")(fake) is fake
        assert get_advantage_estimator("test_fake") is fake
        with pytest.raises(ValueError, match="'test_fake' is already registered"):
            register_advantage("test_fake")(fake)
    finally:
        ADVANTAGE_ESTIMATORS.remove("test_fake")
