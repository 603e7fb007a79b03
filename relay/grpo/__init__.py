"""GRPO math as pure functions: advantages and KL-in-reward (numpy); KL penalty, policy losses, loss aggregation and
rollout correction (jittable)."""

from relay.grpo.advantage import (
    ADVANTAGE_ESTIMATORS,
    AdvantageOptions,
    get_advantage_estimator,
    group_rows,
    grpo_outcome_advantage,
    register_advantage,
)
from relay.grpo.kl import KL_KINDS, kl_penalty
from relay.grpo.kl_reward import kl_penalized_scores
from relay.grpo.log_ratio import MAX_LOG_RATIO
from relay.grpo.loss_aggregation import LOSS_AGG_MODES, aggregate_slot_loss, aggregate_token_mean
from relay.grpo.policy_losses import POLICY_LOSSES, get_policy_loss, policy_loss_per_token, register_policy_loss
from relay.grpo.reinforce import masked_whiten  # registers the REINFORCE++ estimators
from relay.grpo.rollout_correction import truncated_is_weights

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "AdvantageOptions",
    "KL_KINDS",
    "LOSS_AGG_MODES",
    "MAX_LOG_RATIO",
    "POLICY_LOSSES",
    "aggregate_slot_loss",
    "aggregate_token_mean",
    "get_advantage_estimator",
    "get_policy_loss",
    "grpo_outcome_advantage",
    "group_rows",
    "kl_penalized_scores",
    "kl_penalty",
    "masked_whiten",
    "policy_loss_per_token",
    "register_advantage",
    "register_policy_loss",
    "truncated_is_weights",
]
