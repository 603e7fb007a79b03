"""Golden values for the entropy term of the GRPO loss: ``- entropy_coeff * agg(entropy)``.

The per-token entropy comes from relay.models.jax_logprobs.token_log_probs; the learner aggregates it with
relay.grpo.aggregate_slot_loss (token-mean: aggregate_token_mean) and subtracts ``entropy_coeff`` times it
(relay/learner/grpo_loss.py).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np

from relay.grpo import aggregate_token_mean
from relay.models.jax_logprobs import token_log_probs

LN3 = math.log(3.0)


def test_entropy_golden_values() -> None:
    # logits [0, 0]: p = [0.5, 0.5], H = ln 2 = 0.6931472, log p(target 0) = -0.6931472
    # logits [0, ln 3]: p = [0.25, 0.75], H = 0.25 ln 4 + 0.75 ln(4/3) = 0.3465736 + 0.2157616 = 0.5623351,
    #   log p(target 1) = ln 0.75 = -0.2876821
    logits = jnp.array([[[0.0, 0.0], [0.0, LN3]]])
    log_probs, entropy = token_log_probs(logits, jnp.array([[0, 1]]), 1.0)
    np.testing.assert_allclose(entropy, [[0.6931472, 0.5623351]], rtol=1e-6)
    np.testing.assert_allclose(log_probs, [[-0.6931472, -0.2876821]], rtol=1e-6)


def test_entropy_uses_the_temperature() -> None:
    # logits [0, 2 ln 3] at T = 2 are [0, ln 3] after scaling: the same H = 0.5623351 and log p = -0.2876821
    log_probs, entropy = token_log_probs(jnp.array([[[0.0, 2 * LN3]]]), jnp.array([[1]]), 2.0)
    np.testing.assert_allclose(entropy, [[0.5623351]], rtol=1e-6)
    np.testing.assert_allclose(log_probs, [[-0.2876821]], rtol=1e-6)


def test_entropy_bonus_aggregated() -> None:
    # entropies [[ln 2, 0.5623351], [ln 2, pad]], token-mean over 3 tokens:
    #   (0.6931472 + 0.5623351 + 0.6931472) / 3 = 1.9486295 / 3 = 0.6495432; with entropy_coeff 0.01 the loss
    #   term is -0.01 * 0.6495432 = -0.0064954
    entropy = jnp.array([[math.log(2.0), 0.5623351], [math.log(2.0), 123.0]])
    mask = jnp.array([[1, 1], [1, 0]])
    term = -0.01 * aggregate_token_mean(entropy, mask, 3.0)
    np.testing.assert_allclose(term, -0.0064954, rtol=1e-4)


def test_entropy_gradient_pushes_towards_uniform() -> None:
    # Two classes, p = sigmoid(z1 - z0) = 0.75: dH/dz1 = p (1 - p) ln((1 - p) / p) = 0.1875 * ln(1/3)
    # = 0.1875 * -1.0986123 = -0.2059898 and dH/dz0 = +0.2059898. Minimising -coef * H with coef 0.01
    # therefore has gradient [-0.0020599, +0.0020599]: a descent step lowers z1 and raises z0 (towards uniform).
    def entropy_loss(logits: jax.Array) -> jax.Array:
        return -0.01 * jnp.sum(token_log_probs(logits, jnp.array([[1]]), 1.0)[1])

    grad = jax.grad(entropy_loss)(jnp.array([[[0.0, LN3]]]))
    np.testing.assert_allclose(grad, [[[-0.0020599, 0.0020599]]], rtol=1e-4)


def test_entropy_without_gradient_has_the_same_values_and_no_gradient() -> None:
    # entropy_grad=False (the learner with entropy_coeff 0): the entropy is the same number, its gradient is 0,
    # and the log-prob's gradient is unchanged: log p(target 1) = z1 - logsumexp(z) -> d/dz = onehot - p =
    # [-0.25, 0.25] for p = [0.25, 0.75].
    logits, target = jnp.array([[[0.0, LN3]]]), jnp.array([[1]])
    _, with_grad = token_log_probs(logits, target, 1.0)
    _, without = token_log_probs(logits, target, 1.0, entropy_grad=False)
    np.testing.assert_allclose(without, with_grad, rtol=1e-6)
    grad_entropy = jax.grad(lambda z: jnp.sum(token_log_probs(z, target, 1.0, entropy_grad=False)[1]))(logits)
    np.testing.assert_array_equal(grad_entropy, np.zeros((1, 1, 2), np.float32))
    grad_log_prob = jax.grad(lambda z: jnp.sum(token_log_probs(z, target, 1.0, entropy_grad=False)[0]))(logits)
    np.testing.assert_allclose(grad_log_prob, [[[-0.25, 0.25]]], rtol=1e-5)
