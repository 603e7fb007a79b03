"""Golden values and gradients of the policy-loss registry (expected numbers from the papers' formulas, worked by
hand in the comments; the gradients are d(sum of per-token losses) / d(log-probs))."""

import math
from dataclasses import asdict, replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relay.config.algorithm_schema import AlgorithmConfig
from relay.grpo.log_ratio import MAX_LOG_RATIO
from relay.grpo.policy_losses import (
    POLICY_LOSSES,
    PolicyLossConfig,
    PolicyLossInputs,
    _first_by_key,
    get_policy_loss,
    sequence_mean_per_slot,
    sequence_sum_per_slot,
    token_covariance,
)
from relay.learner.grpo_loss import policy_loss_config

DEFAULT = policy_loss_config(asdict(AlgorithmConfig()))  # the schema's default algorithm section


def _run(name, log_probs, old, adv, config=DEFAULT, sequences=None, rng=None):
    """Per-token loss, indicators and the gradient of the summed loss w.r.t. the log-probs."""
    lp, old, adv = (jnp.asarray([x], jnp.float32) for x in (log_probs, old, adv))
    mask = jnp.ones_like(lp)
    seq = None if sequences is None else jnp.asarray([sequences], jnp.int32)

    def total(x):
        loss, ind = get_policy_loss(name)(PolicyLossInputs(x, old, adv, mask, seq, rng), config)
        return jnp.sum(loss), (loss, ind)

    (_, (loss, ind)), grad = jax.value_and_grad(total, has_aux=True)(lp)
    return np.asarray(loss[0]), {k: np.asarray(v[0]) for k, v in ind.items()}, np.asarray(grad[0])


def test_registry_and_the_config_choices() -> None:
    from relay.config import ConfigError, load_config

    # Registration order is the module table's, and the config's refusal lists the registry in that order.
    assert list(POLICY_LOSSES) == ["vanilla", "gspo", "cispo", "geo_mean", "clip_cov", "kl_cov"]
    with pytest.raises(ConfigError) as refused:
        load_config(overrides=["algorithm.policy_loss=ppo2"], environ={})
    lines = [line.strip() for line in str(refused.value).splitlines()]
    assert f"algorithm.policy_loss='ppo2': must be one of {', '.join(POLICY_LOSSES)}" in lines
    with pytest.raises(ValueError, match=r"unknown policy loss 'ppo2'; valid: \['cispo'"):
        get_policy_loss("ppo2")


def test_the_settings_come_from_the_config_section() -> None:
    # the schema's defaults, read through the algorithm section: the papers' GSPO range, GMPO's 0.4, Clip-Cov's and
    # KL-Cov's shares
    expected = PolicyLossConfig("vanilla", 0.2, 0.2, None, 3e-4, 4e-4, 0.4, 0.4, 2e-4, 1.0, 5.0, 2e-3, 1.0)
    assert expected == DEFAULT
    gspo = {"clip_ratio_low": 0.1, "clip_ratio_high": 0.3}
    section = {**asdict(AlgorithmConfig()), "policy_loss": "gspo", "gspo": gspo}
    config = policy_loss_config(section)
    assert (config.name, config.gspo_clip_ratio_low, config.gspo_clip_ratio_high) == ("gspo", 0.1, 0.3)
    # A loss whose own section's settings are not given is refused; the vanilla loss reads only the clip range.
    with pytest.raises(ValueError, match=r"policy loss 'gspo' needs gspo_clip_ratio_low, gspo_clip_ratio_high"):
        PolicyLossConfig("gspo", 0.2, 0.2, None)
    assert PolicyLossConfig("vanilla", 0.2, 0.28, None).clip_ratio_high == 0.28


def test_sequence_mean_per_slot_golden() -> None:
    values, mask, sequences = jnp.array([[1.0, 3.0, 10.0, 0.0]]), jnp.array([[1, 1, 1, 0]]), jnp.array([[1, 1, 2, 0]])
    out = sequence_mean_per_slot(values, mask, sequences)
    np.testing.assert_allclose(np.asarray(out)[0, :3], [2.0, 2.0, 10.0])
    np.testing.assert_allclose(np.asarray(sequence_sum_per_slot(values, mask, sequences))[0, :3], [4.0, 4.0, 10.0])


def test_sequence_mean_per_slot_local_denominator() -> None:
    # (2 + 4) / 2 = 3 on every token of the sequence (the masked one included); a sequence with no response token
    # gives 0 / max(0, 1) = 0, not NaN
    out = sequence_mean_per_slot(jnp.array([[2.0, 4.0, 100.0]]), jnp.array([[1, 1, 0]]), jnp.array([[1, 1, 1]]))
    np.testing.assert_allclose(np.asarray(out), [[3.0, 3.0, 3.0]])
    empty = sequence_mean_per_slot(jnp.array([[2.0, 4.0]]), jnp.array([[0, 0]]), jnp.array([[1, 1]]))
    np.testing.assert_array_equal(np.asarray(empty), [[0.0, 0.0]])


def test_vanilla_is_the_clipped_ppo_token_loss() -> None:
    # A = 1, r = e^0.5 = 1.6487 > 1.2: loss -1.2 (clipped, gradient 0); A = -1, r = 1: loss 1, gradient +1
    loss, ind, grad = _run("vanilla", [0.5, 0.0], [0.0, 0.0], [1.0, -1.0])
    np.testing.assert_allclose(loss, [-1.2, 1.0], atol=1e-6)
    np.testing.assert_allclose(grad, [0.0, 1.0], atol=1e-6)
    np.testing.assert_array_equal(ind["pg_clipfrac"], [1.0, 0.0])


def test_cispo_golden_clipped_tokens_keep_a_gradient() -> None:
    # A = 1, r = 1.5 -> weight 1.2, loss -1.2 * log pi, gradient -1.2; A = -1, r = 1 -> loss log pi, gradient +1
    lp = [math.log(0.3), math.log(0.5)]
    old = [math.log(0.2), math.log(0.5)]
    loss, ind, grad = _run("cispo", lp, old, [1.0, -1.0])
    np.testing.assert_allclose(loss, [-1.2 * math.log(0.3), math.log(0.5)], rtol=1e-5)
    np.testing.assert_allclose(grad, [-1.2, 1.0], rtol=1e-5)
    np.testing.assert_array_equal(ind["pg_clipfrac"], [1.0, 0.0])


def test_gspo_golden_sequence_ratio_and_gradient() -> None:
    # token log-ratios 0.001, -0.003 -> mean -0.001, s = exp(-0.001) = 0.9990005; range [0.9997, 1.0004]
    config = replace(DEFAULT, name="gspo")
    loss, ind, grad = _run("gspo", [0.001, -0.003], [0.0, 0.0], [1.0, 1.0], config, sequences=[1, 1])
    s = math.exp(-0.001)
    np.testing.assert_allclose(loss, [-s, -s], rtol=1e-6)  # A = 1: -A s wins, not clipped
    np.testing.assert_allclose(grad, [-s, -s], rtol=1e-6)  # each token: -A s d log pi_t
    np.testing.assert_array_equal(ind["pg_clipfrac"], [0.0, 0.0])
    loss, ind, grad = _run("gspo", [0.001, -0.003], [0.0, 0.0], [-1.0, -1.0], config, sequences=[1, 1])
    np.testing.assert_allclose(loss, [0.9997, 0.9997], rtol=1e-6)  # A = -1: clipped to 1 - 3e-4
    np.testing.assert_allclose(grad, [0.0, 0.0])
    # Two sequences in one row get their own ratios: s_1 = exp(0.2), s_2 = exp(-0.4), both far outside the range
    loss, _, _ = _run("gspo", [0.2, -0.4], [0.0, 0.0], [1.0, 1.0], config, sequences=[1, 2])
    np.testing.assert_allclose(loss, [-1.0004, -math.exp(-0.4)], rtol=1e-6)


def test_gspo_sequence_ratio_is_the_mean_of_the_unclipped_token_log_ratios() -> None:
    # 20 tokens: log-ratio 60 (log-prob 0 now, -60 before) and 19 at -0.8 / 19 = -0.0421053 each. The sequence's
    # log-ratio is the mean of the raw values, (60 - 0.8) / 20 = 2.96, so s = exp(2.96) = 19.297972; clipping each
    # token to +-20 first would give (20 - 0.8) / 20 = 0.96, exp(0.96) = 2.6116965.
    config = replace(DEFAULT, name="gspo")  # range [0.9997, 1.0004]
    lp = [0.0] + [-0.8 / 19] * 19
    old = [-60.0] + [0.0] * 19
    # A = -1: max(s, clip(s)) = s on every token, not clipped; each token's gradient is -A s = s
    loss, ind, grad = _run("gspo", lp, old, [-1.0] * 20, config, sequences=[1] * 20)
    np.testing.assert_allclose(loss, [19.297972] * 20, rtol=1e-5)
    np.testing.assert_allclose(grad, [19.297972] * 20, rtol=1e-5)
    np.testing.assert_array_equal(ind["pg_clipfrac"], [0.0] * 20)
    # A = +1: max(-19.297972, -1.0004) = -1.0004 on every token, clipped, no gradient
    loss, ind, grad = _run("gspo", lp, old, [1.0] * 20, config, sequences=[1] * 20)
    np.testing.assert_allclose(loss, [-1.0004] * 20, rtol=1e-6)
    np.testing.assert_array_equal(grad, [0.0] * 20)
    np.testing.assert_array_equal(ind["pg_clipfrac"], [1.0] * 20)


def test_gspo_clips_the_sequence_mean_to_max_log_ratio() -> None:
    # log-ratios [50, 0]: mean 25, clipped to 20, s = exp(20) = 4.8516520e8 (clipping the tokens first: [20, 0], mean
    # 10, exp(10) = 22026.466). A = -1: loss s on both tokens; the gradient s_it = sg(s) pi_t / sg(pi_t) keeps s.
    assert MAX_LOG_RATIO == 20.0
    loss, _, grad = _run("gspo", [0.0, -1.0], [-50.0, -1.0], [-1.0, -1.0], replace(DEFAULT, name="gspo"), [1, 1])
    np.testing.assert_allclose(loss, [4.8516520e8] * 2, rtol=1e-6)
    np.testing.assert_allclose(grad, [4.8516520e8] * 2, rtol=1e-6)


def test_geo_mean_golden() -> None:
    # range [-0.4, 0.4], log-ratios [0.5, -0.1]: A = 1 -> chosen [0.4, -0.1], mean 0.15, loss -exp(0.15) per token;
    # the summed loss -2 exp(0.15) moves with token 1 only: d/d lp_1 = -2 exp(0.15) / 2 = -exp(0.15)
    loss, ind, grad = _run("geo_mean", [0.5, -0.1], [0.0, 0.0], [1.0, 1.0], sequences=[1, 1])
    np.testing.assert_allclose(loss, [-math.exp(0.15)] * 2, rtol=1e-6)
    np.testing.assert_allclose(grad, [0.0, -math.exp(0.15)], rtol=1e-6)
    np.testing.assert_array_equal(ind["pg_clipfrac"], [1.0, 0.0])
    # A = -1 -> chosen [0.5, -0.1], mean 0.2, loss exp(0.2); gradient exp(0.2) / 2 * 2 tokens / ... = exp(0.2)
    _, ind, _ = _run("geo_mean", [0.5, -0.1], [0.0, 0.0], [0.0, 0.0], sequences=[1, 1])
    np.testing.assert_array_equal(ind["pg_clipfrac"], [0.0, 0.0])  # A = 0: no clip to count
    loss, _, grad = _run("geo_mean", [0.5, -0.1], [0.0, 0.0], [-1.0, -1.0], sequences=[1, 1])
    np.testing.assert_allclose(loss, [math.exp(0.2)] * 2, rtol=1e-6)
    np.testing.assert_allclose(grad, [math.exp(0.2)] * 2, rtol=1e-6)


def test_geo_mean_sequence_mean_of_the_unclipped_chosen_log_ratios() -> None:
    # 20 tokens, A = 1, range [-0.4, 0.4]: log-ratio -60 (log-prob -61 now, -1 before) and 19 at 0.8 / 19 = 0.0421053.
    # chosen = min(log r, clip(log r)) = [-60, 0.0421053 x 19] (the pessimistic side of -60 is -60 itself, not
    # clipped), mean (-60 + 0.8) / 20 = -2.96, loss -exp(-2.96) = -0.0518189 per token; clipping each token to +-20
    # first would choose -20: mean -0.96, loss -exp(-0.96) = -0.38289.
    lp = [-61.0] + [-1.0 + 0.8 / 19] * 19
    loss, ind, grad = _run("geo_mean", lp, [-1.0] * 20, [1.0] * 20, sequences=[1] * 20)
    np.testing.assert_allclose(loss, [-0.0518189] * 20, rtol=1e-5)
    # the summed loss -20 exp(mean) moves with every token's chosen value: d/d lp_t = -exp(-2.96), token 0 included
    np.testing.assert_allclose(grad, [-0.0518189] * 20, rtol=1e-5)
    np.testing.assert_array_equal(ind["pg_clipfrac"], [0.0] * 20)


def test_geo_mean_clips_the_sequence_mean_to_max_log_ratio() -> None:
    # A = -1, log-ratios [50, 0]: chosen = max(log r, clip(log r)) = [50, 0], mean 25, clipped to 20: loss
    # exp(20) = 4.8516520e8 per token (clipping the tokens first: mean 10, exp(10) = 22026.466). Where the bound is
    # active the sequence's loss is constant: no gradient.
    loss, ind, grad = _run("geo_mean", [0.0, -1.0], [-50.0, -1.0], [-1.0, -1.0], sequences=[1, 1])
    np.testing.assert_allclose(loss, [4.8516520e8] * 2, rtol=1e-6)
    np.testing.assert_array_equal(grad, [0.0, 0.0])
    np.testing.assert_array_equal(ind["pg_clipfrac"], [0.0, 0.0])


def test_token_covariance_and_selection_golden() -> None:
    inputs = PolicyLossInputs(jnp.array([[-0.5, -1.5]]), jnp.zeros((1, 2)), jnp.array([[1.0, -1.0]]), jnp.ones((1, 2)))
    np.testing.assert_allclose(np.asarray(token_covariance(inputs)), [[0.5, 0.5]])
    picked = _first_by_key(jnp.array([[3.0, 1.0, 2.0, 0.0]]), jnp.array([[True, True, True, False]]), jnp.array(2.0))
    np.testing.assert_array_equal(np.asarray(picked), [[False, True, True, False]])


def test_clip_cov_cuts_the_gradient_of_one_in_band_token() -> None:
    # A = [1, 2, 3, -6] (mean 0), log-probs [0.5, 1, 1, -2.5] (mean 0): covariances [0.5, 2, 3, 15]; band (1, 5)
    # holds tokens 1 and 2; ratio 0.25 of 4 tokens = 1 token is cut; ratio 1 everywhere, so vanilla's gradient is -A
    lp, adv = [0.5, 1.0, 1.0, -2.5], [1.0, 2.0, 3.0, -6.0]
    config = replace(DEFAULT, name="clip_cov", clip_cov_ratio=0.25)
    cut_tokens = set()
    for seed in range(12):
        loss, ind, grad = _run("clip_cov", lp, lp, adv, config, rng=jax.random.PRNGKey(seed))
        np.testing.assert_allclose(loss, [-a for a in adv], rtol=1e-6)  # values unchanged
        (cut,) = np.flatnonzero(ind["pg_cov_selected"])
        assert cut in (1, 2) and grad[cut] == 0.0
        np.testing.assert_allclose(np.delete(grad, cut), np.delete([-a for a in adv], cut), rtol=1e-6)
        cut_tokens.add(int(cut))
    assert cut_tokens == {1, 2}  # drawn at random among the band's tokens


def test_kl_cov_golden() -> None:
    # covariances [0.4, -0.4, 0] (see the docstring); token 0 gets + |0.1|
    config = replace(DEFAULT, name="kl_cov", kl_cov_ratio=0.34)
    lp = [-0.2, -1.0, -0.6]
    old = [-0.3, -0.8, -0.6]
    loss, ind, grad = _run("kl_cov", lp, old, [1.0, 1.0, -2.0], config)
    np.testing.assert_allclose(loss, [-math.exp(0.1) + 0.1, -math.exp(-0.2), 2.0], rtol=1e-5)
    np.testing.assert_array_equal(ind["pg_cov_selected"], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(grad, [-math.exp(0.1) + 1.0, -math.exp(-0.2), 2.0], rtol=1e-5)


@pytest.mark.parametrize("name", sorted(POLICY_LOSSES))
def test_every_loss_matches_vanilla_on_policy_at_ratio_one(name: str) -> None:
    """At ratio 1 (the on-policy first step) every loss's gradient is the policy gradient -A d log pi (per token,
    for one-token sequences and covariances outside clip_cov's band), whatever it does off-policy."""
    adv = [0.5, -1.0, 2.0]
    config = replace(DEFAULT, name=name, clip_cov_lb=100.0)  # kl_cov's |log r| has gradient 0 at r = 1
    _, _, grad = _run(name, [-1.0, -2.0, -0.5], [-1.0, -2.0, -0.5], adv, config, [1, 2, 3], jax.random.PRNGKey(0))
    np.testing.assert_allclose(grad, [-a for a in adv], rtol=1e-6)
