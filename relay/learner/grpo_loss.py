"""The GRPO objective of one micro-batch, as sums divided by the whole batch's token and sequence counts.

Because every term is a sum over the micro-batch divided by a global count, the micro-batch losses
(and their gradients) add up to the full-batch loss, whatever the micro-batch size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jax

from relay.grpo import (
    aggregate_slot_loss,
    aggregate_token_mean,
    kl_penalty,
    policy_loss_per_token,
    truncated_is_weights,
)
from relay.models.jax_logprobs import gather_slots, slot_log_probs
from relay.models.llama_flax import LlamaForCausalLM, lm_head_weight


@dataclass(frozen=True)
class LossSettings:
    clip_ratio_low: float
    clip_ratio_high: float
    kl_coef: float  # 0 disables the KL loss
    kl_type: str
    temperature: float
    old_from_batch: bool  # False: old log-probs = the learner's own, detached (on-policy, one epoch)
    # The batch field old_from_batch reads: old_log_probs (the actor copy's) or rollout_log_probs (the
    # behaviour policy's, old_log_prob_source=rollout: no recompute, the ratio is against the sampler).
    old_key: str = "old_log_probs"
    loss_agg_mode: str = "token-mean"
    entropy_coeff: float = 0.0
    rollout_is_cap: float | None = None  # None: no truncated importance sampling
    clip_ratio_c: float | None = None  # dual clip bound for negative advantages (None: off)
    loss_scale_constant: float = 1.0  # Dr.GRPO's normaliser for seq-mean-token-sum-norm (derived.loss_scale_constant)

    @classmethod
    def from_config(cls, algorithm: Mapping[str, Any], derived: Mapping[str, Any], temperature: float) -> LossSettings:
        """From the ``algorithm`` section, the ``derived`` block and the sampling temperature."""
        return cls(
            clip_ratio_low=algorithm["clip_ratio_low"],
            clip_ratio_high=algorithm["clip_ratio_high"],
            kl_coef=algorithm["kl_loss_coef"] if algorithm["use_kl_loss"] else 0.0,
            kl_type=algorithm["kl_loss_type"],
            temperature=temperature,
            old_from_batch=algorithm["old_log_prob_source"] != "learner",
            old_key="rollout_log_probs" if algorithm["old_log_prob_source"] == "rollout" else "old_log_probs",
            loss_agg_mode=algorithm["loss_agg_mode"],
            entropy_coeff=algorithm["entropy_coeff"],
            rollout_is_cap=algorithm["rollout_is_cap"] if algorithm["rollout_is"] == "tis" else None,
            clip_ratio_c=algorithm["clip_ratio_c"],
            loss_scale_constant=derived["loss_scale_constant"],
        )


def micro_batch_loss(
    variables: dict,
    batch: dict[str, jax.Array],
    global_tokens: jax.Array,
    global_sequences: jax.Array,
    *,
    model: LlamaForCausalLM,
    settings: LossSettings,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Loss and additive metrics for one micro-batch of the optimizer step's batch, in the row layout of
    :mod:`relay.packing`. ``variables``: the model's flax variables (``{"params": ...}``, plus ``"lora"`` adapters
    with LoRA; :func:`relay.learner.train_step.model_variables`).

    ``batch`` holds ``input_ids``, ``segment_ids``, ``position_ids`` (and ``branch_ids`` when prompts are
    shared) [b, W] and, per response slot [b, K],
    ``slot_index``, ``targets``, ``slot_mask``, ``slot_seq_tokens``, ``advantages`` (and ``ref_log_probs``
    when present, ``settings.old_key`` when ``settings.old_from_batch``, ``rollout_log_probs`` with truncated
    IS). ``global_tokens`` / ``global_sequences`` count the response tokens / sequences of the whole
    optimizer step, so the micro-batch results add up.

    ``loss = policy_loss + kl_coef * kl - entropy_coeff * entropy``, each aggregated by
    ``settings.loss_agg_mode``. Metrics other than the losses are token means over ``global_tokens``.
    """
    hidden = model.apply(
        variables, batch["input_ids"], batch["segment_ids"], batch["position_ids"], batch.get("branch_ids")
    )
    head = lm_head_weight(variables["params"], model.config)
    # With entropy_coeff 0 the entropy is a metric only: no [slots, vocab] backward work for it.
    log_probs, entropy = slot_log_probs(
        gather_slots(hidden, batch["slot_index"]),
        head,
        batch["targets"],
        settings.temperature,
        entropy_grad=settings.entropy_coeff != 0,
    )
    mask = batch["slot_mask"]
    old = batch[settings.old_key] if settings.old_from_batch else jax.lax.stop_gradient(log_probs)
    per_token, clipped, dual_clipped = policy_loss_per_token(
        log_probs,
        old,
        batch["advantages"],
        clip_ratio_low=settings.clip_ratio_low,
        clip_ratio_high=settings.clip_ratio_high,
        clip_ratio_c=settings.clip_ratio_c,
    )

    def agg(values: jax.Array) -> jax.Array:
        return aggregate_slot_loss(
            values,
            mask,
            settings.loss_agg_mode,
            global_tokens,
            global_sequences,
            batch["slot_seq_tokens"],
            settings.loss_scale_constant,
        )

    metrics: dict[str, jax.Array] = {}
    if settings.rollout_is_cap is not None:
        weights = truncated_is_weights(old, batch["rollout_log_probs"], settings.rollout_is_cap)
        per_token = per_token * weights
        metrics["rollout_is_weight"] = aggregate_token_mean(weights, mask, global_tokens)
    pg_loss = agg(per_token)
    entropy_loss = agg(entropy)
    loss = pg_loss - settings.entropy_coeff * entropy_loss  # no gradient through it when the coefficient is 0
    if "ref_log_probs" in batch:  # absent when no KL is used: the reference forward never ran
        kl_per_token = kl_penalty(log_probs, batch["ref_log_probs"], settings.kl_type)
        metrics["kl"] = aggregate_token_mean(kl_per_token, mask, global_tokens)
        if settings.kl_coef > 0:
            loss = loss + settings.kl_coef * agg(kl_per_token)
    metrics |= {
        "loss": loss,
        "pg_loss": pg_loss,
        "entropy": aggregate_token_mean(entropy, mask, global_tokens),
        "pg_clipfrac": aggregate_token_mean(clipped, mask, global_tokens),
        "pg_clipfrac_lower": aggregate_token_mean(dual_clipped, mask, global_tokens),
        "ppo_kl": aggregate_token_mean(old - log_probs, mask, global_tokens),
    }
    return loss, {**metrics, "log_probs": jax.lax.stop_gradient(log_probs)}
