"""Golden-value tests for the dual-clip policy loss (clip_ratio_c), values computed by hand in the comments."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relay.grpo import aggregate_token_mean, get_policy_loss, policy_loss_per_token
from relay.grpo.policy_losses import PolicyLossConfig, PolicyLossInputs

# One row of 6 tokens, clip range [0.8, 1.2], dual-clip bound c = 3. d = log_probs - old_log_probs:
#   t0: A = -1,   d = 1.5,  ratio 4.4816891: pg1 = 4.4816891, pg2 = 1.2 -> max 4.4816891 > 1 * 3 -> 3 (dual)
#   t1: A = -1,   d = 0.5,  ratio 1.6487213: pg1 = 1.6487213, pg2 = 1.2 -> 1.6487213 < 3 (unchanged)
#   t2: A = +1,   d = 1.5,  ratio 4.4816891: pg1 = -4.4816891, pg2 = -1.2 -> -1.2 (clipped; A > 0, no dual clip)
#   t3: A = -2,   d = -0.5, ratio 0.6065307: pg1 = 1.2130613, pg2 = 2 * 0.8 = 1.6 -> 1.6 (clipped) < 2 * 3 = 6
#   t4: A = -0.5, d = 2.0,  ratio 7.3890561: pg1 = 3.6945280, pg2 = 0.6 -> 3.6945280 > 0.5 * 3 = 1.5 -> 1.5 (dual)
#   t5: A = 0,    d = 3.0:  pg1 = pg2 = 0 -> 0 (neither clipped nor dual-clipped)
OLD = jnp.full((1, 6), -2.0)
NEW = OLD + jnp.array([[1.5, 0.5, 1.5, -0.5, 2.0, 3.0]])
ADV = jnp.array([[-1.0, -1.0, 1.0, -2.0, -0.5, 0.0]])
MASK = jnp.ones((1, 6), dtype=jnp.int32)
CLIP = {"clip_ratio_low": 0.2, "clip_ratio_high": 0.2}

LOSS_DUAL = [[3.0, 1.6487213, -1.2, 1.6, 1.5, 0.0]]
LOSS_PLAIN = [[4.4816891, 1.6487213, -1.2, 1.6, 3.6945280, 0.0]]


def _vanilla(clip_ratio_c: float | None) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The registry's vanilla loss on the row above, with the dual-clip bound ``clip_ratio_c``."""
    config = PolicyLossConfig("vanilla", **CLIP, clip_ratio_c=clip_ratio_c)
    return get_policy_loss("vanilla")(PolicyLossInputs(NEW, OLD, ADV, MASK), config)


def test_dual_clip_golden_values() -> None:
    loss, clipped, dual = policy_loss_per_token(NEW, OLD, ADV, **CLIP, clip_ratio_c=3.0)
    np.testing.assert_allclose(loss, LOSS_DUAL, rtol=1e-6)
    # pg2 > pg1 only on t2 and t3; the dual-clip bound is active on t0 and t4
    np.testing.assert_array_equal(clipped, [[0, 0, 1, 1, 0, 0]])
    np.testing.assert_array_equal(dual, [[1, 0, 0, 0, 1, 0]])


def test_positive_advantage_is_unaffected_by_dual_clip() -> None:
    # A >= 0 tokens (t2, t5) get the same loss for every c, even c barely above 1
    for c in (1.01, 3.0, 100.0):
        loss, _, dual = policy_loss_per_token(NEW, OLD, ADV, **CLIP, clip_ratio_c=c)
        np.testing.assert_allclose(loss[0, [2, 5]], [-1.2, 0.0], rtol=1e-6)
        assert float(dual[0, 2]) == 0.0 and float(dual[0, 5]) == 0.0


def test_none_equals_the_plain_clipped_loss() -> None:
    # clip_ratio_c=None: the registry's vanilla loss, and the plain max(pg1, pg2) written out here
    loss, clipped, dual = policy_loss_per_token(NEW, OLD, ADV, **CLIP)
    np.testing.assert_allclose(loss, LOSS_PLAIN, rtol=1e-6)
    np.testing.assert_array_equal(dual, np.zeros((1, 6)))
    vanilla_loss, indicators = _vanilla(None)
    np.testing.assert_array_equal(loss, vanilla_loss)
    np.testing.assert_array_equal(clipped, indicators["pg_clipfrac"])
    ratio = jnp.exp(NEW - OLD)
    reference = jnp.maximum(-ADV * ratio, -ADV * jnp.clip(ratio, 0.8, 1.2))
    np.testing.assert_array_equal(loss, reference)


def test_vanilla_loss_forwards_clip_ratio_c() -> None:
    loss, indicators = _vanilla(3.0)
    np.testing.assert_allclose(loss, LOSS_DUAL, rtol=1e-6)
    np.testing.assert_array_equal(indicators["pg_clipfrac"], [[0, 0, 1, 1, 0, 0]])
    np.testing.assert_array_equal(indicators["pg_clipfrac_lower"], [[1, 0, 0, 0, 1, 0]])


def test_aggregated_loss_and_clipfrac_lower() -> None:
    # Token means over the 6 tokens, as the learner aggregates the loss (token-mean) and the indicators:
    # sum = 3 + 1.6487213 - 1.2 + 1.6 + 1.5 + 0 = 6.5487213; / 6 = 1.0914536
    # pg_clipfrac = 2 / 6 (t2, t3); pg_clipfrac_lower = 2 / 6 (t0, t4)
    loss, indicators = _vanilla(3.0)
    np.testing.assert_allclose(aggregate_token_mean(loss, MASK, 6.0), 1.0914536, rtol=1e-6)
    np.testing.assert_allclose(aggregate_token_mean(indicators["pg_clipfrac"], MASK, 6.0), 2 / 6, rtol=1e-6)
    np.testing.assert_allclose(aggregate_token_mean(indicators["pg_clipfrac_lower"], MASK, 6.0), 2 / 6, rtol=1e-6)
    # without clip_ratio_c: (4.4816891 + 1.6487213 - 1.2 + 1.6 + 3.6945280) / 6 = 10.2249384 / 6 = 1.7041564,
    # and no token counts as dual-clipped
    loss, indicators = _vanilla(None)
    np.testing.assert_allclose(aggregate_token_mean(loss, MASK, 6.0), 1.7041564, rtol=1e-6)
    assert float(aggregate_token_mean(indicators["pg_clipfrac_lower"], MASK, 6.0)) == 0.0


def test_gradient_is_zero_where_the_bound_is_active() -> None:
    # d loss_t / d logp_t = -A * ratio on tokens where pg1 is the loss, else 0:
    #   dual clip:  t0 0 (bound), t1 1 * 1.6487213, t2 0 (clipped), t3 0 (clipped), t4 0 (bound), t5 0 (A = 0)
    #   plain:      t0 4.4816891, t1 1.6487213, t2 0, t3 0, t4 0.5 * 7.3890561 = 3.6945280, t5 0
    def total(lp: jax.Array, c: float | None) -> jax.Array:
        return jnp.sum(policy_loss_per_token(lp, OLD, ADV, **CLIP, clip_ratio_c=c)[0])

    np.testing.assert_allclose(jax.grad(total)(NEW, 3.0), [[0.0, 1.6487213, 0.0, 0.0, 0.0, 0.0]], atol=1e-6)
    np.testing.assert_allclose(
        jax.grad(total)(NEW, None), [[4.4816891, 1.6487213, 0.0, 0.0, 3.6945280, 0.0]], rtol=1e-6, atol=1e-6
    )


def test_jittable() -> None:
    jitted = jax.jit(partial(policy_loss_per_token, **CLIP, clip_ratio_c=3.0))
    loss, _, dual = jitted(NEW, OLD, ADV)
    np.testing.assert_allclose(loss, LOSS_DUAL, rtol=1e-6)
    np.testing.assert_array_equal(dual, [[1, 0, 0, 0, 1, 0]])


@pytest.mark.parametrize("c", [1.0, 0.5, -3.0])
def test_bound_must_exceed_one(c: float) -> None:
    with pytest.raises(ValueError, match=f"clip_ratio_c={c}: the dual-clip bound must be > 1"):
        policy_loss_per_token(NEW, OLD, ADV, **CLIP, clip_ratio_c=c)
