"""The GRPO objective of one micro-batch, as sums divided by the whole batch's token and sequence counts.

Because every term is a sum over the micro-batch divided by a global count, the micro-batch losses
(and their gradients) add up to the full-batch loss, whatever the micro-batch size.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import jax
import jax.numpy as jnp

from relay.grpo.kl import kl_penalty
from relay.grpo.loss_aggregation import aggregate_slot_loss, aggregate_token_mean
from relay.grpo.policy_losses import SECTION_SETTINGS, PolicyLossConfig, PolicyLossInputs, get_policy_loss
from relay.grpo.rollout_correction import sequence_is_weights, sequence_outside, token_outside, truncated_is_weights
from relay.learner.sft_loss import sft_loss
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
    # algorithm.ref_log_prob_source resolved to the learner: the reference log-probs are a forward of the frozen
    # reference weights (full fine-tuning: a copy of the initial params; LoRA: the base, adapters off), not the
    # batch's. JaxLearner runs that forward as a program of its own before each step and hands the step its result
    # as the batch's (relay/learner/reference_pass.py); micro_batch_loss can also run it in each micro-batch.
    ref_in_learner: bool = False
    # algorithm.policy_loss and its sections (policy_loss_config), None: the vanilla loss; its clip_ratio_* fields are
    # replaced by the ones above (see policy).
    policy_loss: PolicyLossConfig | None = None
    rollout_is_mode: str = "tis"  # with rollout_is_cap: tis | seq_tis | seq_geo_tis
    rollout_token_mask: tuple[float, float] | None = None  # (low, high): IcePop's token mask, None: off
    rollout_seq_reject: tuple[str, float, float] | None = None  # (ratio, low, high): sequence rejection, None: off
    # grpo: the policy loss above; sft: the negative log-likelihood of the trained response tokens (a supervised
    # warm start, relay/learner/sft_loss.py), which reads no advantages, log-probs or KL.
    objective: str = "grpo"

    @property
    def policy(self) -> PolicyLossConfig:
        """The policy loss's settings with this object's clip range and dual clip (no ``policy_loss``: the vanilla
        loss's, which reads nothing else)."""
        if self.policy_loss is None:
            return PolicyLossConfig("vanilla", self.clip_ratio_low, self.clip_ratio_high, self.clip_ratio_c)
        return replace(
            self.policy_loss,
            clip_ratio_low=self.clip_ratio_low,
            clip_ratio_high=self.clip_ratio_high,
            clip_ratio_c=self.clip_ratio_c,
        )

    @property
    def reads_rollout(self) -> bool:
        """Whether the loss reads ``rollout_log_probs`` (rollout correction of any kind)."""
        return any(x is not None for x in (self.rollout_is_cap, self.rollout_token_mask, self.rollout_seq_reject))

    @property
    def reads_reference(self) -> bool:
        """Whether the loss needs reference log-probs from the batch (a KL loss not computed from the base here)."""
        return self.kl_coef > 0 and not self.ref_in_learner

    @classmethod
    def from_config(
        cls,
        algorithm: Mapping[str, Any],
        derived: Mapping[str, Any],
        temperature: float,
    ) -> LossSettings:
        """From the ``algorithm`` section, the ``derived`` block (its ``loss_scale_constant`` and
        ``reference_in_learner``) and the sampling temperature."""
        kl_loss = bool(algorithm["use_kl_loss"])
        token_mask, seq_reject = algorithm.get("rollout_token_mask"), algorithm.get("rollout_seq_reject")
        return cls(
            clip_ratio_low=algorithm["clip_ratio_low"],
            clip_ratio_high=algorithm["clip_ratio_high"],
            kl_coef=algorithm["kl_loss_coef"] if kl_loss else 0.0,
            kl_type=algorithm["kl_loss_type"],
            temperature=temperature,
            old_from_batch=algorithm["old_log_prob_source"] != "learner",
            old_key="rollout_log_probs" if algorithm["old_log_prob_source"] == "rollout" else "old_log_probs",
            loss_agg_mode=algorithm["loss_agg_mode"],
            entropy_coeff=algorithm["entropy_coeff"],
            rollout_is_cap=algorithm["rollout_is_cap"] if algorithm["rollout_is"] != "none" else None,
            rollout_is_mode=algorithm["rollout_is"] if algorithm["rollout_is"] != "none" else "tis",
            rollout_token_mask=(token_mask["low"], token_mask["high"]) if token_mask and token_mask["enable"] else None,
            rollout_seq_reject=(
                (seq_reject["ratio"], seq_reject["low"], seq_reject["high"])
                if seq_reject and seq_reject["enable"]
                else None
            ),
            policy_loss=policy_loss_config(algorithm),
            clip_ratio_c=algorithm["clip_ratio_c"],
            loss_scale_constant=derived["loss_scale_constant"],
            ref_in_learner=bool(derived["reference_in_learner"]),
        )


def policy_loss_config(algorithm: Mapping[str, Any]) -> PolicyLossConfig:
    """``algorithm.policy_loss``, the clip range and dual clip (``clip_ratio_low``, ``clip_ratio_high``,
    ``clip_ratio_c``) and the loss sections (``gspo``, ``geo_mean``, ``clip_cov``, ``kl_cov``) of a merged config's
    ``algorithm`` section as a :class:`PolicyLossConfig`: every value is read from the section, whose defaults are
    the schema's (:class:`relay.config.schema.AlgorithmConfig`)."""
    return PolicyLossConfig(
        name=algorithm["policy_loss"],
        clip_ratio_low=algorithm["clip_ratio_low"],
        clip_ratio_high=algorithm["clip_ratio_high"],
        clip_ratio_c=algorithm["clip_ratio_c"],
        **section_settings(algorithm),
    )


def section_settings(algorithm: Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`PolicyLossConfig` fields read from the loss sections of ``algorithm``: field ``<loss>_<key>`` is
    ``algorithm[<loss>][<key>]`` for every field :data:`SECTION_SETTINGS` lists (``gspo_clip_ratio_low`` is
    ``algorithm["gspo"]["clip_ratio_low"]``)."""
    return {
        name: algorithm[loss][name.removeprefix(f"{loss}_")]
        for loss, names in SECTION_SETTINGS.items()
        for name in names
    }


def micro_batch_loss(
    variables: dict,
    batch: dict[str, jax.Array],
    global_tokens: jax.Array,
    global_sequences: jax.Array,
    *,
    model: LlamaForCausalLM,
    settings: LossSettings,
    rng: jax.Array | None = None,
    reference: dict | None = None,
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
    With ``settings.ref_in_learner`` the reference log-probs are a forward of ``reference`` (flax variables of the
    frozen reference: a copy of the initial params, or with LoRA ``{"params": base}``, the adapters off), without
    a gradient, instead of ``batch["ref_log_probs"]``. ``rng``: a PRNG key for
    the LoRA adapters' dropout in the policy forward (``model.lora_dropout`` > 0; the reference has no adapters)
    and for the policy losses that draw tokens at random (``clip_cov``).

    The per-token policy loss is ``settings.policy``'s (:mod:`relay.grpo.policy_losses`), then corrected for the
    rollout (:mod:`relay.grpo.rollout_correction`): weighted by the truncated IS weights and zeroed on masked
    tokens and rejected sequences (the denominators stay the batch's counts).
    """

    # With entropy_coeff 0 the entropy is a metric only: no [slots, vocab] backward work for it.
    keys = (None, None) if rng is None else (jax.random.fold_in(rng, 0), jax.random.fold_in(rng, 1))
    dropout = {"dropout": keys[0]} if keys[0] is not None and model.lora_dropout > 0 else None
    log_probs, entropy = slot_forward(model, variables, batch, settings, settings.entropy_coeff != 0, dropout)
    ref_log_probs = reference_log_probs(model, reference, batch, settings)
    return loss_from_log_probs(
        log_probs, entropy, ref_log_probs, batch, global_tokens, global_sequences, settings, keys[1]
    )


def slot_forward(
    model: LlamaForCausalLM,
    variables: dict,
    batch: dict[str, jax.Array],
    settings: LossSettings,
    entropy_grad: bool,
    rngs: dict | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Per-slot log-probs and entropies ``[b, K]`` of ``batch``'s response slots under ``variables``."""
    inputs = (batch["input_ids"], batch["segment_ids"], batch["position_ids"], batch.get("branch_ids"))
    hidden = model.apply(variables, *inputs, rngs=rngs)
    head = lm_head_weight(variables["params"], model.config)
    return slot_log_probs(
        gather_slots(hidden, batch["slot_index"]), head, batch["targets"], settings.temperature, entropy_grad
    )


def reference_variables(frozen: dict[str, Any]) -> dict[str, Any]:
    """The flax variables of the reference forward (``settings.ref_in_learner``): ``frozen["reference"]`` (full
    fine-tuning: a frozen copy of the initial params), else the LoRA base ``frozen["base"]`` with no adapters."""
    if "reference" in frozen:
        return {"params": frozen["reference"]}
    if "base" in frozen:
        return {"params": frozen["base"]}
    raise ValueError("ref_in_learner: the step was given neither reference params nor a LoRA base")


def reference_log_probs(
    model: LlamaForCausalLM, reference: dict | None, batch: dict[str, jax.Array], settings: LossSettings
) -> jax.Array | None:
    """The KL terms' reference log-probs: a forward of ``reference`` without a gradient when
    ``settings.ref_in_learner`` (the reference weights are frozen and hold no adapters), else the batch's
    ``ref_log_probs`` (None when no KL reads them)."""
    if not settings.ref_in_learner:
        return batch.get("ref_log_probs")
    if reference is None:
        raise ValueError("LossSettings.ref_in_learner: the loss needs the reference variables")
    return jax.lax.stop_gradient(slot_forward(model, reference, batch, settings, False)[0])


def loss_from_log_probs(
    log_probs: jax.Array,
    entropy: jax.Array,
    ref_log_probs: jax.Array | None,
    batch: dict[str, jax.Array],
    global_tokens: jax.Array,
    global_sequences: jax.Array,
    settings: LossSettings,
    key: jax.Array | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """:func:`micro_batch_loss` from the policy's per-slot ``log_probs`` and ``entropy`` ``[b, K]`` (differentiable)
    and the reference's; ``key``: for the policy losses that draw tokens at random (``clip_cov``). With
    ``settings.objective == "sft"`` the supervised loss instead (:func:`relay.learner.sft_loss.sft_loss`)."""
    mask = batch["slot_mask"]
    if settings.objective == "sft":
        return sft_loss(log_probs, entropy, mask, global_tokens)
    old = old_log_probs(log_probs, batch, settings)
    policy = settings.policy
    inputs = PolicyLossInputs(log_probs, old, batch["advantages"], mask, batch["slot_sequence"], key)
    per_token, indicators = get_policy_loss(policy.name)(inputs, policy)
    agg = slot_loss_aggregator(batch, global_tokens, global_sequences, settings)
    per_token, metrics = rollout_corrected(per_token, old, batch, global_tokens, global_sequences, settings)
    pg_loss = agg(per_token)
    entropy_loss = agg(entropy)
    loss = pg_loss - settings.entropy_coeff * entropy_loss  # no gradient through it when the coefficient is 0
    if ref_log_probs is not None:  # absent when no KL is used: the reference forward never ran
        kl_per_token = kl_penalty(log_probs, ref_log_probs, settings.kl_type)
        metrics["kl"] = aggregate_token_mean(kl_per_token, mask, global_tokens)
        if settings.kl_coef > 0:
            loss = loss + settings.kl_coef * agg(kl_per_token)
    metrics |= {
        "loss": loss,
        "pg_loss": pg_loss,
        **token_mean_metrics(log_probs, old, entropy, indicators, mask, global_tokens),
    }
    return loss, {**metrics, "log_probs": jax.lax.stop_gradient(log_probs)}


def old_log_probs(log_probs: jax.Array, batch: dict[str, jax.Array], settings: LossSettings) -> jax.Array:
    """The ratio's denominator: the batch's ``settings.old_key`` when ``settings.old_from_batch``, else the policy's
    own log-probs without a gradient (on-policy: the ratio is 1 in value, its gradient the policy gradient's)."""
    return batch[settings.old_key] if settings.old_from_batch else jax.lax.stop_gradient(log_probs)


def slot_loss_aggregator(
    batch: dict[str, jax.Array], global_tokens: jax.Array, global_sequences: jax.Array, settings: LossSettings
) -> Callable[[jax.Array], jax.Array]:
    """``agg(values [b, K]) -> scalar``: a per-token term reduced by ``settings.loss_agg_mode`` over the batch's real
    slots, divided by the whole step's token or sequence count (:func:`aggregate_slot_loss`)."""

    def agg(values: jax.Array) -> jax.Array:
        return aggregate_slot_loss(
            values,
            batch["slot_mask"],
            settings.loss_agg_mode,
            global_tokens,
            global_sequences,
            batch["slot_seq_tokens"],
            settings.loss_scale_constant,
        )

    return agg


def rollout_corrected(
    per_token: jax.Array,
    old: jax.Array,
    batch: dict[str, jax.Array],
    global_tokens: jax.Array,
    global_sequences: jax.Array,
    settings: LossSettings,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The per-token policy loss corrected for the gap between the old and the rollout policy
    (:mod:`relay.grpo.rollout_correction`), and the corrections' metrics: weighted by the truncated IS weights
    (``settings.rollout_is_cap``), then zeroed on the tokens outside ``settings.rollout_token_mask`` and on the
    sequences ``settings.rollout_seq_reject`` rejects."""
    mask, sequences = batch["slot_mask"], batch["slot_sequence"]
    metrics: dict[str, jax.Array] = {}
    rollout = batch.get("rollout_log_probs")
    if settings.rollout_is_cap is not None:
        if settings.rollout_is_mode == "tis":
            weights = truncated_is_weights(old, rollout, settings.rollout_is_cap)
        else:
            mode, cap = settings.rollout_is_mode, settings.rollout_is_cap
            weights = sequence_is_weights(old, rollout, mask, sequences, mode, cap)
        per_token = per_token * weights
        metrics["rollout_is_weight"] = aggregate_token_mean(weights, mask, global_tokens)
    dropped = jnp.zeros_like(per_token)
    if settings.rollout_token_mask is not None:
        masked = token_outside(old, rollout, *settings.rollout_token_mask)
        metrics["rollout_token_masked"] = aggregate_token_mean(masked, mask, global_tokens)
        dropped = jnp.maximum(dropped, masked)
    if settings.rollout_seq_reject is not None:
        rejected = sequence_outside(old, rollout, mask, sequences, *settings.rollout_seq_reject)
        # Each sequence counted once: its tokens' 1 / (its token count), summed over the batch's sequences.
        share = jnp.sum(rejected * mask / jnp.maximum(batch["slot_seq_tokens"], 1.0)) / global_sequences
        metrics["rollout_seq_rejected"] = share
        dropped = jnp.maximum(dropped, rejected)
    if settings.rollout_token_mask is not None or settings.rollout_seq_reject is not None:
        per_token = jnp.where(dropped > 0, 0.0, per_token)
    return per_token, metrics


def token_mean_metrics(
    log_probs: jax.Array,
    old: jax.Array,
    entropy: jax.Array,
    indicators: dict[str, jax.Array],
    mask: jax.Array,
    global_tokens: jax.Array,
) -> dict[str, jax.Array]:
    """The metrics that are token means over the whole step: the entropy, the policy loss's indicators (clip
    fractions and the like) and ``ppo_kl``, the mean of ``old - new`` log-probs."""
    return {
        "entropy": aggregate_token_mean(entropy, mask, global_tokens),
        **{name: aggregate_token_mean(values, mask, global_tokens) for name, values in indicators.items()},
        "ppo_kl": aggregate_token_mean(old - log_probs, mask, global_tokens),
    }
