"""Golden-value tests for relay.grpo.kl (values computed by hand in the comments)."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relay.grpo import KL_KINDS, kl_penalty

# Token pairs (log_probs, ref_log_probs); d = ref - logp is [-1, 1, 2, 0, 3, -30, 100].
LOG_PROBS = jnp.array([-1.0, -2.0, -3.0, -0.5, -4.0, 0.0, -100.0])
REF_LOG_PROBS = jnp.array([-2.0, -1.0, -1.0, -0.5, -1.0, -30.0, 0.0])


def test_k1_is_log_ratio() -> None:
    # logp - ref = [1, -1, -2, 0, -3, 30, -100] (can be negative, unclipped)
    kl = kl_penalty(LOG_PROBS, REF_LOG_PROBS, "k1")
    np.testing.assert_allclose(kl, [1.0, -1.0, -2.0, 0.0, -3.0, 30.0, -100.0])


def test_k2_is_half_squared_log_ratio() -> None:
    # 0.5 * [1, 1, 4, 0, 9, 900, 10000]
    kl = kl_penalty(LOG_PROBS, REF_LOG_PROBS, "k2")
    np.testing.assert_allclose(kl, [0.5, 0.5, 2.0, 0.0, 4.5, 450.0, 5000.0])


def test_k3_values_and_clamp() -> None:
    # exp(d) - d - 1:
    #   d=-1:  0.3678794 + 1 - 1 = 0.3678794
    #   d=1:   2.7182818 - 2     = 0.7182818
    #   d=2:   7.3890561 - 3     = 4.3890561
    #   d=0:   1 - 0 - 1         = 0
    #   d=3:   20.0855369 - 4    = 16.0855369 -> clipped to 10
    #   d=-30: clip to -20: 2e-9 + 20 - 1 = 19.0 -> clipped to 10
    #   d=100: clip to 20: 4.85e8 - 21 -> clipped to 10
    kl = kl_penalty(LOG_PROBS, REF_LOG_PROBS, "k3")
    np.testing.assert_allclose(kl, [0.3678794, 0.7182818, 4.3890561, 0.0, 10.0, 10.0, 10.0], rtol=1e-6)


def test_low_var_kl_is_alias_of_k3() -> None:
    np.testing.assert_array_equal(
        kl_penalty(LOG_PROBS, REF_LOG_PROBS, "low_var_kl"), kl_penalty(LOG_PROBS, REF_LOG_PROBS, "k3")
    )


def test_k3_gradient_is_finite_for_huge_log_ratio() -> None:
    # Token 0: d = ref - logp = 100. Without the inner clip, exp(100) = inf in float32 and the backward
    # pass gives inf * 0 = NaN; with it, d is clipped to 20 (and kl to 10), so the gradient is 0.
    # Token 1: d = 1 (logp=-1, ref=0), kl = exp(ref - logp) - (ref - logp) - 1 = 0.718 is not clipped,
    # dkl/dlogp = -exp(1) + 1 = -1.7182818.
    ref = jnp.array([0.0, 0.0])
    grad = jax.grad(lambda lp: jnp.sum(kl_penalty(lp, ref, "k3")))(jnp.array([-100.0, -1.0]))
    np.testing.assert_allclose(grad, [0.0, -1.7182818], rtol=1e-6)


@pytest.mark.parametrize("kind", KL_KINDS)
def test_jittable(kind: str) -> None:
    jitted = jax.jit(partial(kl_penalty, kind=kind))
    np.testing.assert_allclose(jitted(LOG_PROBS, REF_LOG_PROBS), kl_penalty(LOG_PROBS, REF_LOG_PROBS, kind), rtol=1e-6)


def test_unknown_kind_lists_kinds() -> None:
    with pytest.raises(ValueError, match=r"unknown KL penalty kind 'mse'.*'k1', 'k2', 'k3', 'low_var_kl'"):
        kl_penalty(LOG_PROBS, REF_LOG_PROBS, "mse")


def test_config_kl_types_are_the_kinds() -> None:
    from relay.config import ConfigError, load_config

    with pytest.raises(ConfigError) as refused:
        load_config(overrides=["algorithm.kl_loss_type=mse"], environ={})
    lines = [line.strip() for line in str(refused.value).splitlines()]
    assert f"algorithm.kl_loss_type='mse': must be one of {', '.join(KL_KINDS)}" in lines


def test_abs_kl_golden() -> None:
    # |logp - ref| = [1, 1, 2, 0, 3, 30, 100]
    np.testing.assert_allclose(kl_penalty(LOG_PROBS, REF_LOG_PROBS, "abs"), [1.0, 1.0, 2.0, 0.0, 3.0, 30.0, 100.0])
    # gradient sign(logp - ref): token 3 (policy = reference) gets 0, not jnp.abs's 1
    grad = jax.grad(lambda lp: jnp.sum(kl_penalty(lp, REF_LOG_PROBS, "abs")))(LOG_PROBS)
    np.testing.assert_array_equal(grad, [1.0, -1.0, -1.0, 0.0, -1.0, 1.0, -1.0])


@pytest.mark.parametrize("kind", ["k1", "k3", "low_var_kl"])
def test_straight_through_kinds_have_the_value_of_theirs_and_the_gradient_of_k2(kind: str) -> None:
    # value of `kind`; gradient of 0.5 (logp - ref)^2 = logp - ref: [1, -1, -2, 0, -3, 30, -100]
    plus = partial(kl_penalty, ref_log_probs=REF_LOG_PROBS, kind=kind + "+")
    np.testing.assert_allclose(plus(LOG_PROBS), kl_penalty(LOG_PROBS, REF_LOG_PROBS, kind), rtol=1e-6)
    grad = jax.grad(lambda lp: jnp.sum(plus(lp)))(LOG_PROBS)
    np.testing.assert_allclose(grad, [1.0, -1.0, -2.0, 0.0, -3.0, 30.0, -100.0], rtol=1e-6)


def test_k3_plus_worked_example() -> None:
    # logp -1, ref -2: value exp(-1) + 1 - 1 = 0.3679, gradient 1 (k3's own: 1 - exp(-1) = 0.6321)
    lp, ref = jnp.array([-1.0]), jnp.array([-2.0])
    np.testing.assert_allclose(kl_penalty(lp, ref, "k3+"), [0.3678794], rtol=1e-6)
    np.testing.assert_allclose(jax.grad(lambda x: kl_penalty(x, ref, "k3+")[0])(lp), [1.0])
    np.testing.assert_allclose(jax.grad(lambda x: kl_penalty(x, ref, "k3")[0])(lp), [1 - 0.3678794], rtol=1e-6)
