"""Golden values of the vanilla (PPO clipped) policy loss through the registry, aggregated as the learner does
(token-mean over the whole batch's token count; relay/learner/grpo_loss.py), values computed by hand in the
comments."""

import jax
import jax.numpy as jnp
import numpy as np

from relay.grpo import aggregate_token_mean, get_policy_loss
from relay.grpo.policy_losses import PolicyLossConfig, PolicyLossInputs, sequence_mean_per_slot

# Two sequences of 3 tokens. log_probs - old_log_probs (d) and the advantage A of each row:
#   row 0: d = [0.2, -0.3, 0.3], A = +1, mask [1, 1, 1]
#   row 1: d = [0.3, -0.3, 0.5], A = -1, mask [1, 1, 0]  (the last token is padding)
# ratio = exp(d): exp(0.2) = 1.2214028, exp(-0.3) = 0.7408182, exp(0.3) = 1.3498588, exp(0.5) = 1.6487213
OLD = jnp.full((2, 3), -1.0)
LOG_RATIO = jnp.array([[0.2, -0.3, 0.3], [0.3, -0.3, 0.5]])
NEW = OLD + LOG_RATIO
ADV = jnp.array([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]])
MASK = jnp.array([[1, 1, 1], [1, 1, 0]], dtype=jnp.int32)
N_TOKENS = 5.0  # response tokens in the whole batch


def _loss(new, old, adv, mask, low=0.2, high=0.2, denominator=N_TOKENS):
    """The vanilla loss's token-mean over ``denominator`` tokens and its metrics (``pg_clipfrac``, ``ppo_kl``), as
    relay/learner/grpo_loss.py aggregates them."""
    config = PolicyLossConfig("vanilla", clip_ratio_low=low, clip_ratio_high=high, clip_ratio_c=None)
    per_token, indicators = get_policy_loss("vanilla")(PolicyLossInputs(new, old, adv, mask), config)
    loss = aggregate_token_mean(per_token, mask, denominator)
    metrics = {
        "pg_clipfrac": aggregate_token_mean(indicators["pg_clipfrac"], mask, denominator),
        "ppo_kl": aggregate_token_mean(old - new, mask, denominator),
    }
    return loss, metrics


def test_symmetric_clip_golden_values() -> None:
    # clip range [0.8, 1.2]; per token max(pg1, pg2) with pg1 = -A * ratio, pg2 = -A * clip(ratio):
    #   row 0 (A=+1): d=0.2:  pg1 -1.2214028, pg2 -1.2       -> -1.2       (clipped)
    #                 d=-0.3: pg1 -0.7408182, pg2 -0.8       -> -0.7408182
    #                 d=0.3:  pg1 -1.3498588, pg2 -1.2       -> -1.2       (clipped)
    #   row 1 (A=-1): d=0.3:  pg1 +1.3498588, pg2 +1.2       -> 1.3498588
    #                 d=-0.3: pg1 +0.7408182, pg2 +0.8       -> 0.8        (clipped)
    # sum = -1.2 - 0.7408182 - 1.2 + 1.3498588 + 0.8 = -0.9909594; / 5 = -0.1981919
    # clipfrac = 3 / 5 = 0.6; ppo_kl = -(0.2 - 0.3 + 0.3 + 0.3 - 0.3) / 5 = -0.04
    loss, metrics = _loss(NEW, OLD, ADV, MASK)
    np.testing.assert_allclose(loss, -0.1981919, atol=1e-6)
    np.testing.assert_allclose(metrics["pg_clipfrac"], 0.6, atol=1e-6)
    np.testing.assert_allclose(metrics["ppo_kl"], -0.04, atol=1e-6)


def test_asymmetric_clip_higher() -> None:
    # clip range [0.8, 1.28]: exp(0.2) = 1.2214028 is no longer clipped, exp(0.3) = 1.3498588 -> 1.28:
    #   row 0: -1.2214028, -0.7408182, -1.28 (clipped); row 1: 1.3498588, 0.8 (clipped)
    # sum = -1.2214028 - 0.7408182 - 1.28 + 1.3498588 + 0.8 = -1.0923622; / 5 = -0.2184724; clipfrac 2/5
    loss, metrics = _loss(NEW, OLD, ADV, MASK, low=0.2, high=0.28)
    np.testing.assert_allclose(loss, -0.2184724, atol=1e-6)
    np.testing.assert_allclose(metrics["pg_clipfrac"], 0.4, atol=1e-6)


def test_asymmetric_clip_lower_bound() -> None:
    # clip range [0.7, 1.28]: exp(-0.3) = 0.7408182 is inside, so row 1 token 1 becomes 0.7408182 (unclipped)
    # sum = -1.2214028 - 0.7408182 - 1.28 + 1.3498588 + 0.7408182 = -1.151544; / 5 = -0.2303088; clipfrac 1/5
    loss, metrics = _loss(NEW, OLD, ADV, MASK, low=0.3, high=0.28)
    np.testing.assert_allclose(loss, -0.2303088, atol=1e-6)
    np.testing.assert_allclose(metrics["pg_clipfrac"], 0.2, atol=1e-6)


def test_zero_advantage_is_never_clipped() -> None:
    # A = 0 -> pg1 = pg2 = 0 everywhere: loss 0 and no token counts as clipped, even with ratio exp(0.5)
    loss, metrics = _loss(NEW, OLD, jnp.zeros((2, 3)), MASK)
    assert float(loss) == 0.0 and float(metrics["pg_clipfrac"]) == 0.0


def test_huge_log_ratio_stays_finite() -> None:
    # log ratio 100 is clipped to 20 before exp: ratio = exp(20) = 4.8516520e8 instead of inf.
    # A = -1: pg1 = 4.8516520e8, pg2 = 1.2 -> loss 4.8516520e8 over 1 token
    loss, _ = _loss(jnp.array([[0.0]]), jnp.array([[-100.0]]), jnp.array([[-1.0]]), jnp.array([[1]]), denominator=1.0)
    np.testing.assert_allclose(loss, 4.8516520e8, rtol=1e-6)


def test_micro_batches_sum_to_full_batch() -> None:
    # row 0 alone: (-1.2 - 0.7408182 - 1.2) / 5 = -0.6281636; row 1 alone: (1.3498588 + 0.8) / 5 = 0.4299718
    # -0.6281636 + 0.4299718 = -0.1981919 = full-batch loss
    halves = [_loss(NEW[i : i + 1], OLD[i : i + 1], ADV[i : i + 1], MASK[i : i + 1]) for i in range(2)]
    np.testing.assert_allclose([h[0] for h in halves], [-0.6281636, 0.4299718], atol=1e-6)
    full_loss, full_metrics = _loss(NEW, OLD, ADV, MASK)
    np.testing.assert_allclose(sum(h[0] for h in halves), full_loss, atol=1e-6)
    for name in ("pg_clipfrac", "ppo_kl"):
        np.testing.assert_allclose(sum(h[1][name] for h in halves), full_metrics[name], atol=1e-6)


def test_mean_of_micro_batch_means_differs() -> None:
    # The per-micro-batch mean weights tokens unequally: row 0 mean = -3.1408182 / 3 = -1.0469394,
    # row 1 mean = 2.1498588 / 2 = 1.0749294; their average 0.013995 != -0.1981919.
    # (Each row one sequence: its mean over its own tokens is sequence_mean_per_slot's value on every token.)
    per_token = jnp.array([[-1.2, -0.7408182, -1.2], [1.3498588, 0.8, 123.0]])
    row_means = sequence_mean_per_slot(per_token, MASK, jnp.ones((2, 3), jnp.int32))
    means = [float(row_means[i, 0]) for i in range(2)]
    np.testing.assert_allclose(means, [-1.0469394, 1.0749294], atol=1e-6)
    assert abs((means[0] + means[1]) / 2 - (-0.1981919)) > 0.2


def test_micro_batch_property_random_batch() -> None:
    rng = np.random.default_rng(0)
    batch, length = 8, 16
    old = jnp.asarray(rng.normal(-2.0, 0.5, (batch, length)), dtype=jnp.float32)
    new = old + jnp.asarray(rng.normal(0.0, 0.3, (batch, length)), dtype=jnp.float32)
    adv = jnp.asarray(np.repeat(rng.normal(size=(batch, 1)), length, axis=1), dtype=jnp.float32)
    mask = jnp.asarray(np.arange(length)[None, :] < rng.integers(1, length + 1, (batch, 1)), dtype=jnp.int32)
    denominator = float(mask.sum())
    full, full_metrics = _loss(new, old, adv, mask, denominator=denominator)
    for cut in (4, 3):  # equal halves and an uneven split
        parts = [
            _loss(new[s], old[s], adv[s], mask[s], denominator=denominator) for s in (slice(0, cut), slice(cut, None))
        ]
        np.testing.assert_allclose(parts[0][0] + parts[1][0], full, atol=1e-6)
        for name in ("pg_clipfrac", "ppo_kl"):
            np.testing.assert_allclose(parts[0][1][name] + parts[1][1][name], full_metrics[name], atol=1e-6)


def test_gradient_is_zero_on_clipped_and_masked_tokens() -> None:
    # Unclipped token: d(-A * exp(logp - old)) / dlogp / 5 = -A * ratio / 5; clipped or masked: 0.
    #   row 0: [0, -0.7408182 / 5 = -0.1481636, 0]; row 1: [1.3498588 / 5 = 0.2699718, 0, 0]
    grad = jax.grad(lambda lp: _loss(lp, OLD, ADV, MASK)[0])(NEW)
    np.testing.assert_allclose(grad, [[0.0, -0.1481636, 0.0], [0.2699718, 0.0, 0.0]], atol=1e-6)


def test_jittable_with_traced_denominator() -> None:
    jitted = jax.jit(lambda new, old, adv, mask, denominator: _loss(new, old, adv, mask, denominator=denominator))
    loss, metrics = jitted(NEW, OLD, ADV, MASK, jnp.float32(N_TOKENS))
    np.testing.assert_allclose(loss, -0.1981919, atol=1e-6)
    np.testing.assert_allclose(metrics["pg_clipfrac"], 0.6, atol=1e-6)
