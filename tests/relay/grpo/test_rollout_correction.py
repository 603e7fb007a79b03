"""Golden values of the rollout-correction weights and masks (worked by hand in the comments)."""

import math

import jax.numpy as jnp
import numpy as np
import pytest

from relay.grpo.rollout_correction import (
    sequence_is_weights,
    sequence_log_ratio,
    sequence_outside,
    token_outside,
    truncated_is_weights,
)


def _row(log_ratios, sequences):
    old = jnp.asarray([log_ratios], jnp.float32)
    return old, jnp.zeros_like(old), (jnp.asarray([sequences]) > 0).astype(jnp.float32), jnp.asarray([sequences])


def test_config_choices_are_the_modules() -> None:
    from relay.config import ConfigError, load_config
    from relay.grpo.rollout_correction import ROLLOUT_IS_MODES, SEQUENCE_RATIOS

    reject = ["algorithm.rollout_seq_reject.enable=true", "algorithm.rollout_seq_reject.ratio=mean"]
    with pytest.raises(ConfigError) as refused:
        load_config(overrides=["algorithm.rollout_is=seq", *reject], environ={})
    lines = [line.strip() for line in str(refused.value).splitlines()]
    assert f"algorithm.rollout_is='seq': must be one of {', '.join(ROLLOUT_IS_MODES)}" in lines
    assert f"algorithm.rollout_seq_reject.ratio='mean': must be one of {', '.join(SEQUENCE_RATIOS)}" in lines


def test_sequence_log_ratio_product_and_geometric() -> None:
    # sequence 1: [0.2, -0.1, 0.5] -> sum 0.6, mean 0.2; sequence 2 packed beside it: [1.0] -> 1.0 both ways
    old, rollout, mask, seq = _row([0.2, -0.1, 0.5, 1.0, 0.0], [1, 1, 1, 2, 0])
    np.testing.assert_allclose(
        np.asarray(sequence_log_ratio(old, rollout, mask, seq, "product"))[0, :4], [0.6] * 3 + [1.0], rtol=1e-6
    )
    np.testing.assert_allclose(
        np.asarray(sequence_log_ratio(old, rollout, mask, seq, "geometric"))[0, :4], [0.2] * 3 + [1.0], rtol=1e-6
    )
    with pytest.raises(ValueError, match="must be one of"):
        sequence_log_ratio(old, rollout, mask, seq, "arithmetic")


def test_sequence_is_weights_golden() -> None:
    old, rollout, mask, seq = _row([0.2, -0.1, 0.5], [1, 1, 1])
    np.testing.assert_allclose(
        np.asarray(sequence_is_weights(old, rollout, mask, seq, "seq_tis", 2.0)), [[math.exp(0.6)] * 3], rtol=1e-6
    )
    np.testing.assert_allclose(
        np.asarray(sequence_is_weights(old, rollout, mask, seq, "seq_geo_tis", 2.0)), [[math.exp(0.2)] * 3], rtol=1e-6
    )
    old, rollout, mask, seq = _row([0.5, 0.5, 0.5], [1, 1, 1])
    np.testing.assert_allclose(np.asarray(sequence_is_weights(old, rollout, mask, seq, "seq_tis", 2.0)), [[2.0] * 3])


def test_token_and_sequence_outside_golden() -> None:
    old, rollout, _, _ = _row([0.0, 0.8, -0.8], [1, 1, 1])
    np.testing.assert_array_equal(np.asarray(token_outside(old, rollout, 0.5, 2.0)), [[0, 1, 1]])
    # geometric ratios: sequence 1 exp(0.2) = 1.22 kept, sequence 2 exp(0.75) = 2.12 rejected
    old, rollout, mask, seq = _row([0.2, -0.1, 0.5, 1.0, 0.5], [1, 1, 1, 2, 2])
    out = sequence_outside(old, rollout, mask, seq, "geometric", 0.5, 2.0)
    np.testing.assert_array_equal(np.asarray(out), [[0, 0, 0, 1, 1]])


def test_truncated_is_weights_golden() -> None:
    # exp(-1.0 - -1.5) = exp(0.5) = 1.6487213 -> capped at 1.5; exp(-2.0 - -1.0) = exp(-1) = 0.3678794
    w = truncated_is_weights(jnp.array([-1.0, -2.0, -0.3]), jnp.array([-1.5, -1.0, -0.3]), cap=1.5)
    np.testing.assert_allclose(np.asarray(w), [1.5, 0.3678794, 1.0], rtol=1e-6)
