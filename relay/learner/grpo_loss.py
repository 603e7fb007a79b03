"""The GRPO objective of one micro-batch, as a sum over tokens divided by the step's global token count.

Because every term is ``sum(per_token * mask) / global_tokens``, the micro-batch losses (and
their gradients) add up to the full-batch token-mean, whatever the micro-batch size.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from relay.grpo import aggregate_token_mean, clipped_policy_loss, kl_penalty
from relay.models.jax_logprobs import response_log_probs
from relay.models.llama_flax import LlamaForCausalLM


@dataclass(frozen=True)
class LossSettings:
    clip_ratio_low: float
    clip_ratio_high: float
    kl_coef: float
    kl_type: str
    temperature: float
    old_from_batch: bool  # False: old log-probs = the learner's own, detached (on-policy, one epoch)


def micro_batch_loss(
    params: dict,
    batch: dict[str, jax.Array],
    global_tokens: jax.Array,
    *,
    model: LlamaForCausalLM,
    prompt_length: int,
    settings: LossSettings,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Loss and additive metrics (each already divided by ``global_tokens``) for one micro-batch.

    ``batch`` holds ``input_ids``, ``attention_mask``, ``position_ids`` [b, P+R] and
    ``response_mask``, ``advantages``, ``ref_log_probs`` (and ``old_log_probs`` when
    ``settings.old_from_batch``) [b, R].
    """
    log_probs, entropy = response_log_probs(
        model,
        params,
        batch["input_ids"],
        batch["attention_mask"],
        batch["position_ids"],
        prompt_length,
        settings.temperature,
    )
    mask = batch["response_mask"]
    old = batch["old_log_probs"] if settings.old_from_batch else jax.lax.stop_gradient(log_probs)
    pg_loss, pg_metrics = clipped_policy_loss(
        log_probs,
        old,
        batch["advantages"],
        mask,
        clip_ratio_low=settings.clip_ratio_low,
        clip_ratio_high=settings.clip_ratio_high,
        loss_denominator=global_tokens,
    )
    kl = aggregate_token_mean(
        kl_penalty(log_probs, batch["ref_log_probs"], settings.kl_type), mask, global_tokens
    )
    loss = pg_loss + settings.kl_coef * kl
    metrics = {
        "loss": loss,
        "pg_loss": pg_loss,
        "kl": kl,
        "entropy": aggregate_token_mean(entropy, mask, global_tokens),
        "pg_clipfrac": pg_metrics["pg_clipfrac"],
        "ppo_kl": pg_metrics["ppo_kl"],
    }
    return loss, {**metrics, "log_probs": jax.lax.stop_gradient(log_probs)}


def zeros_like_tree(tree: dict) -> dict:
    return jax.tree_util.tree_map(jnp.zeros_like, tree)
