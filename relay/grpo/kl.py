"""Per-token KL penalty estimators between the policy and the reference model (jittable, jax.numpy)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

KL_KINDS = ("k1", "k2", "k3", "low_var_kl")


def kl_penalty(log_probs: jax.Array, ref_log_probs: jax.Array, kind: str) -> jax.Array:
    """Per-token estimate of KL(policy || reference) from the log-probs of the sampled tokens.

    Kinds (Schulman's k1/k2/k3 estimators, with ``d = ref_log_probs - log_probs``):

    - ``"k1"``: ``log_probs - ref_log_probs`` (unbiased, high variance, can be negative);
    - ``"k2"``: ``0.5 * (log_probs - ref_log_probs) ** 2``;
    - ``"k3"`` / ``"low_var_kl"``: ``exp(d) - d - 1`` (unbiased, always >= 0, low variance). As in verl,
      ``d`` is first clipped to [-20, 20] so ``exp`` cannot overflow to inf (exp(89) already does in
      float32; the outer clip would hide the inf in the forward pass, but the backward pass would
      compute inf * 0 = NaN), and the result is clipped to [-10, 10] so a few outlier tokens where the
      policy has drifted far from the reference cannot dominate the loss and its gradient.

    ``kind`` is a Python string, so the branch is resolved at trace time and the function is jittable.
    """
    if kind == "k1":
        return log_probs - ref_log_probs
    if kind == "k2":
        return 0.5 * jnp.square(log_probs - ref_log_probs)
    if kind in ("k3", "low_var_kl"):
        d = jnp.clip(ref_log_probs - log_probs, -20.0, 20.0)
        return jnp.clip(jnp.exp(d) - d - 1.0, -10.0, 10.0)
    raise ValueError(f"unknown KL penalty kind '{kind}'; valid: {list(KL_KINDS)}")
