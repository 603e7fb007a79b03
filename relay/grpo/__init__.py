"""GRPO math as pure functions: advantages (numpy), KL penalty and policy loss (jittable jax.numpy)."""

from relay.grpo.advantage import (
    ADVANTAGE_ESTIMATORS,
    get_advantage_estimator,
    grpo_outcome_advantage,
    register_advantage,
)
from relay.grpo.kl import KL_KINDS, kl_penalty
from relay.grpo.policy_loss import aggregate_token_mean, clipped_policy_loss, masked_mean

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "KL_KINDS",
    "aggregate_token_mean",
    "clipped_policy_loss",
    "get_advantage_estimator",
    "grpo_outcome_advantage",
    "kl_penalty",
    "masked_mean",
    "register_advantage",
]
