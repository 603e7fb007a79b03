"""Loss aggregation modes (relay.grpo.loss_aggregation): the docstrings' worked examples and the micro-batch
property."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relay.grpo import LOSS_AGG_MODES, aggregate_slot_loss, aggregate_token_mean, get_advantage_estimator


def aggregate_loss(values, mask, mode, num_tokens, num_sequences, *, loss_scale_constant=None):
    """:func:`aggregate_slot_loss` on the padded layout (one sequence per row): a token's sequence length is its
    row's token count, and the Dr. GRPO constant defaults to the response width R."""
    mask = jnp.asarray(mask, jnp.float32)
    seq_tokens = jnp.broadcast_to(jnp.sum(mask, axis=-1, keepdims=True), mask.shape)
    constant = values.shape[-1] if loss_scale_constant is None else loss_scale_constant
    return aggregate_slot_loss(values, mask, mode, num_tokens, num_sequences, seq_tokens, constant)


# sequence A: token losses [1, 2, 3]; sequence B: [6] (padded); 4 tokens, 2 sequences
VALUES = np.array([[1.0, 2.0, 3.0], [6.0, 9.0, 9.0]], np.float32)
MASK = np.array([[1, 1, 1], [1, 0, 0]], np.float32)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", 12 / 4),
        ("token-sum", 12.0),
        ("seq-mean-token-sum", (6 + 6) / 2),
        ("seq-mean-token-mean", (2 + 6) / 2),
        ("seq-mean-token-sum-norm", (6 + 6) / (2 * 3)),  # constant defaults to the width R = 3 here
    ],
)
def test_worked_example(mode: str, expected: float) -> None:
    assert float(aggregate_loss(VALUES, MASK, mode, 4.0, 2.0)) == pytest.approx(expected)


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_micro_batches_add_up(mode: str) -> None:
    whole = float(aggregate_loss(VALUES, MASK, mode, 4.0, 2.0))
    parts = sum(float(aggregate_loss(VALUES[i : i + 1], MASK[i : i + 1], mode, 4.0, 2.0)) for i in range(2))
    assert parts == pytest.approx(whole)


# The docstring's example with response width R = 4 (the constant defaults to it): A = [1, 2, 3], B = [6]
VALUES_R4 = np.array([[1.0, 2.0, 3.0, 9.0], [6.0, 9.0, 9.0, 9.0]], np.float32)
MASK_R4 = np.array([[1, 1, 1, 0], [1, 0, 0, 0]], np.float32)


def test_dr_grpo_norm_worked_example() -> None:
    # (6 + 6) / (2 sequences * R = 4) = 12 / 8 = 1.5
    assert float(aggregate_loss(VALUES_R4, MASK_R4, "seq-mean-token-sum-norm", 4.0, 2.0)) == pytest.approx(1.5)
    # an explicit constant (e.g. the configured max response length 8): 12 / (2 * 8) = 0.75
    value = aggregate_loss(VALUES_R4, MASK_R4, "seq-mean-token-sum-norm", 4.0, 2.0, loss_scale_constant=8.0)
    assert float(value) == pytest.approx(0.75)
    # the other modes ignore the constant
    value = aggregate_loss(VALUES_R4, MASK_R4, "token-mean", 4.0, 2.0, loss_scale_constant=8.0)
    assert float(value) == pytest.approx(3.0)


def test_dr_grpo_norm_micro_batches_with_global_denominators() -> None:
    # A alone: 6 / (2 * 4) = 0.75; B alone: 6 / (2 * 4) = 0.75; 0.75 + 0.75 = 1.5 = the full-batch value.
    # Each piece keeps the width R = 4, so the default constant is the same for both.
    parts = [
        float(aggregate_loss(VALUES_R4[i : i + 1], MASK_R4[i : i + 1], "seq-mean-token-sum-norm", 4.0, 2.0))
        for i in range(2)
    ]
    assert parts == pytest.approx([0.75, 0.75])
    assert sum(parts) == pytest.approx(1.5)


def test_dr_grpo_norm_does_not_reweight_by_length() -> None:
    # Per-token loss 1 everywhere: a 3-token and a 1-token sequence contribute 3 and 1 (no division by their
    # own length as in seq-mean-token-mean, which gives 1 and 1): (3 + 1) / (2 * 4) = 0.5 vs (1 + 1) / 2 = 1
    ones = np.ones_like(VALUES_R4)
    assert float(aggregate_loss(ones, MASK_R4, "seq-mean-token-sum-norm", 4.0, 2.0)) == pytest.approx(0.5)
    assert float(aggregate_loss(ones, MASK_R4, "seq-mean-token-mean", 4.0, 2.0)) == pytest.approx(1.0)


def test_dr_grpo_norm_jittable_with_traced_counts() -> None:
    @jax.jit
    def agg(values, mask, num_sequences, constant):
        return aggregate_loss(values, mask, "seq-mean-token-sum-norm", 4.0, num_sequences, loss_scale_constant=constant)

    assert float(agg(VALUES_R4, MASK_R4, jnp.float32(2.0), jnp.float32(4.0))) == pytest.approx(1.5)


def test_new_mode_is_listed() -> None:
    # the config's choices are these names (tests/relay/config/test_validate_registries.py)
    assert LOSS_AGG_MODES == (
        "token-mean",
        "token-sum",
        "seq-mean-token-sum",
        "seq-mean-token-mean",
        "seq-mean-token-sum-norm",
    )


def test_unknown_mode() -> None:
    with pytest.raises(ValueError, match="unknown loss_agg_mode 'seq-sum'"):
        aggregate_loss(VALUES, MASK, "seq-sum", 4.0, 2.0)


def test_mean_only_estimator_ignores_std() -> None:
    uids = np.array(["q"] * 4, dtype=object)
    _, seq = get_advantage_estimator("grpo_mean")(np.array([1.0, 0.0, 0.0, 1.0]), uids, np.ones((4, 2)))
    np.testing.assert_allclose(seq, [0.5, -0.5, -0.5, 0.5])


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", 3.0),
        ("token-sum", 12.0),
        ("seq-mean-token-sum", 6.0),
        ("seq-mean-token-mean", 4.0),
        ("seq-mean-token-sum-norm", 1.5),
    ],
)
def test_slot_aggregation_worked_example(mode: str, expected: float) -> None:
    """aggregate_slot_loss's docstring: A = [1, 2, 3] and B = [6] packed into one row, plus a padding slot."""
    values = np.array([[1.0, 2.0, 3.0, 6.0, 9.0]], np.float32)
    mask = np.array([[1, 1, 1, 1, 0]], np.float32)
    seq_tokens = np.array([[3, 3, 3, 1, 1]], np.float32)
    got = aggregate_slot_loss(values, mask, mode, 4.0, 2.0, seq_tokens, loss_scale_constant=4.0)
    assert float(got) == pytest.approx(expected)
    # The same value as aggregate_loss on the padded layout of the same two sequences.
    padded = aggregate_loss(VALUES_R4, MASK_R4, mode, 4.0, 2.0, loss_scale_constant=4.0)
    assert float(got) == pytest.approx(float(padded))


def test_aggregate_token_mean_worked_example() -> None:
    # micro-batch A: tokens [1, 2, 3], micro-batch B: token [6]; global denominator 4 -> 1.5 + 1.5 = 3
    part_a = aggregate_token_mean(jnp.array([1.0, 2.0, 3.0, 99.0]), jnp.array([1, 1, 1, 0]), 4.0)
    part_b = aggregate_token_mean(jnp.array([6.0, 99.0]), jnp.array([1, 0]), 4.0)
    np.testing.assert_allclose([part_a, part_b], [1.5, 1.5])
