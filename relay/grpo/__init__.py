"""GRPO math as pure functions: advantages (numpy), KL penalty and policy loss (jittable jax.numpy)."""

from relay.grpo.advantage import (
    ADVANTAGE_ESTIMATORS,
    get_advantage_estimator,
    group_rows,
    grpo_outcome_advantage,
    register_advantage,
)
from relay.grpo.kl import KL_KINDS, kl_penalty
from relay.grpo.policy_loss import (
    LOSS_AGG_MODES,
    aggregate_loss,
    aggregate_token_mean,
    clipped_policy_loss,
    clipped_policy_loss_per_token,
    masked_mean,
    truncated_is_weights,
)

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "KL_KINDS",
    "LOSS_AGG_MODES",
    "aggregate_loss",
    "clipped_policy_loss_per_token",
    "aggregate_token_mean",
    "clipped_policy_loss",
    "get_advantage_estimator",
    "grpo_outcome_advantage",
    "group_rows",
    "kl_penalty",
    "masked_mean",
    "register_advantage",
    "truncated_is_weights",
]
