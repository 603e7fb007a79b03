"""Per-token KL penalty estimators between the policy and the reference model (jittable, jax.numpy)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from relay.grpo.log_ratio import MAX_LOG_RATIO

# algorithm.kl_loss_type's choices (relay/config/validate_algorithm.py reads them).
KL_KINDS = ("k1", "k2", "k3", "low_var_kl", "abs", "k1+", "k3+", "low_var_kl+")


def kl_penalty(log_probs: jax.Array, ref_log_probs: jax.Array, kind: str) -> jax.Array:
    """Per-token estimate of KL(policy || reference) from the log-probs of the sampled tokens.

    Kinds (Schulman's k1/k2/k3 estimators, with ``d = ref_log_probs - log_probs``):

    - ``"k1"``: ``log_probs - ref_log_probs`` (unbiased, high variance, can be negative);
    - ``"k2"``: ``0.5 * (log_probs - ref_log_probs) ** 2``;
    - ``"k3"`` / ``"low_var_kl"``: ``exp(d) - d - 1`` (unbiased, always >= 0, low variance). As in verl,
      ``d`` is first clipped to [-20, 20] (:data:`relay.grpo.log_ratio.MAX_LOG_RATIO`) so ``exp`` cannot
      overflow to inf (exp(89) already does in float32; the outer clip would hide the inf in the forward
      pass, but the backward pass would compute inf * 0 = NaN), and the result is clipped to [-10, 10] so a
      few outlier tokens where the policy has drifted far from the reference cannot dominate the loss and
      its gradient.

    - ``"abs"``: ``|log_probs - ref_log_probs|``;
    - ``"k1+"``, ``"k3+"``, ``"low_var_kl+"`` (straight-through): the VALUE of the named estimator with the
      GRADIENT of ``k2``, ``log_probs - ref_log_probs`` per unit of log-prob (k2's gradient is the unbiased
      gradient of KL(policy || reference) as a loss; k1's is a constant 1 and k3's is biased). Written
      ``k + (k2 - stop_gradient(k2))`` with ``k`` itself under ``stop_gradient``.

    Worked example, ``log_probs = -1``, ``ref = -2`` (d = -1): ``k3+`` has value ``exp(-1) + 1 - 1 = 0.3679`` and
    gradient ``d/d log_probs = -1 - (-2) = 1``; ``k3``'s own gradient is ``1 - exp(-1) = 0.6321``.

    ``kind`` is a Python string, so the branch is resolved at trace time and the function is jittable.
    """
    if kind.endswith("+") and kind[:-1] in ("k1", "k3", "low_var_kl"):
        value = jax.lax.stop_gradient(kl_penalty(log_probs, ref_log_probs, kind[:-1]))
        k2 = kl_penalty(log_probs, ref_log_probs, "k2")
        return value + (k2 - jax.lax.stop_gradient(k2))
    if kind == "abs":  # gradient sign(d), 0 where the policy equals the reference (jnp.abs would give 1 there)
        d = log_probs - ref_log_probs
        return d * jax.lax.stop_gradient(jnp.sign(d))
    if kind == "k1":
        return log_probs - ref_log_probs
    if kind == "k2":
        return 0.5 * jnp.square(log_probs - ref_log_probs)
    if kind in ("k3", "low_var_kl"):
        d = jnp.clip(ref_log_probs - log_probs, -MAX_LOG_RATIO, MAX_LOG_RATIO)
        return jnp.clip(jnp.exp(d) - d - 1.0, -10.0, 10.0)
    raise ValueError(f"unknown KL penalty kind '{kind}'; valid: {list(KL_KINDS)}")
