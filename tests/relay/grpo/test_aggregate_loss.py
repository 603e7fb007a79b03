"""Loss aggregation modes: the docstring's worked example and the micro-batch property."""

import numpy as np
import pytest

from relay.grpo import aggregate_loss, get_advantage_estimator

# sequence A: token losses [1, 2, 3]; sequence B: [6] (padded); 4 tokens, 2 sequences
VALUES = np.array([[1.0, 2.0, 3.0], [6.0, 9.0, 9.0]], np.float32)
MASK = np.array([[1, 1, 1], [1, 0, 0]], np.float32)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("token-mean", 12 / 4), ("seq-mean-token-sum", (6 + 6) / 2), ("seq-mean-token-mean", (2 + 6) / 2)],
)
def test_worked_example(mode: str, expected: float) -> None:
    assert float(aggregate_loss(VALUES, MASK, mode, 4.0, 2.0)) == pytest.approx(expected)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"])
def test_micro_batches_add_up(mode: str) -> None:
    whole = float(aggregate_loss(VALUES, MASK, mode, 4.0, 2.0))
    parts = sum(float(aggregate_loss(VALUES[i : i + 1], MASK[i : i + 1], mode, 4.0, 2.0)) for i in range(2))
    assert parts == pytest.approx(whole)


def test_unknown_mode() -> None:
    with pytest.raises(ValueError, match="unknown loss_agg_mode 'seq-sum'"):
        aggregate_loss(VALUES, MASK, "seq-sum", 4.0, 2.0)


def test_mean_only_estimator_ignores_std() -> None:
    uids = np.array(["q"] * 4, dtype=object)
    _, seq = get_advantage_estimator("grpo_mean")(np.array([1.0, 0.0, 0.0, 1.0]), uids, np.ones((4, 2)))
    np.testing.assert_allclose(seq, [0.5, -0.5, -0.5, 0.5])
