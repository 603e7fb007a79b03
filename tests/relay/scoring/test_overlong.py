import numpy as np
import pytest

from relay.scoring.overlong import apply_overlong_penalty, overlong_penalty


def test_penalty_golden_values():
    got = overlong_penalty([50, 96, 97, 112, 128, 140], max_length=128, buffer_length=32, penalty_factor=1.0)
    np.testing.assert_allclose(got, [0, 0, -1 / 32, -0.5, -1, -1], rtol=0, atol=1e-7)
    assert got.dtype == np.float32


def test_penalty_scales_with_factor_and_whole_budget_buffer():
    got = overlong_penalty([0, 5, 10], max_length=10, buffer_length=10, penalty_factor=0.5)
    np.testing.assert_allclose(got, [0, -0.25, -0.5], atol=1e-7)


def test_apply_golden_values_and_metrics():
    scores, metrics = apply_overlong_penalty(np.array([1, 0.1, 0.1]), [40, 112, 128], 128, 32, 1.0)
    np.testing.assert_allclose(scores, [1, -0.4, -0.9], atol=1e-6)
    assert metrics["reward/overlong_penalty_mean"] == pytest.approx(-0.5)
    assert metrics["reward/overlong_frac"] == pytest.approx(2 / 3)
    assert metrics["reward/overlong_full_frac"] == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    ("buffer_length", "factor", "needle"),
    [(0, 1.0, "overlong_buffer.length=0"), (200, 1.0, "overlong_buffer.length=200"), (8, -1.0, "penalty_factor=-1")],
)
def test_bad_settings_name_the_key(buffer_length, factor, needle):
    with pytest.raises(ValueError, match=needle):
        overlong_penalty([1], 128, buffer_length, factor)


def test_shape_mismatch_is_refused():
    with pytest.raises(ValueError, match="same shape"):
        apply_overlong_penalty(np.zeros(2), [1, 2, 3], 128, 32, 1.0)
