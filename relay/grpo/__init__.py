"""GRPO math as pure functions: advantages and KL-in-reward (numpy), KL penalty and policy loss (jittable)."""

from relay.grpo.advantage import (
    ADVANTAGE_ESTIMATORS,
    get_advantage_estimator,
    group_rows,
    grpo_outcome_advantage,
    register_advantage,
)
from relay.grpo.kl import KL_KINDS, kl_penalty
from relay.grpo.kl_reward import kl_penalized_scores
from relay.grpo.policy_loss import (
    LOSS_AGG_MODES,
    aggregate_loss,
    aggregate_slot_loss,
    aggregate_token_mean,
    clipped_policy_loss,
    clipped_policy_loss_per_token,
    masked_mean,
    policy_loss_per_token,
    truncated_is_weights,
)
from relay.grpo.reinforce import masked_whiten  # registers the REINFORCE++ estimators

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "KL_KINDS",
    "LOSS_AGG_MODES",
    "aggregate_loss",
    "aggregate_slot_loss",
    "aggregate_token_mean",
    "clipped_policy_loss",
    "clipped_policy_loss_per_token",
    "get_advantage_estimator",
    "grpo_outcome_advantage",
    "group_rows",
    "kl_penalized_scores",
    "kl_penalty",
    "masked_mean",
    "masked_whiten",
    "policy_loss_per_token",
    "register_advantage",
    "truncated_is_weights",
]
