"""What a learner process is built from, resolved once from the config by the driver and handed to every learner
host as one typed, picklable object (:class:`LearnerSettings`), instead of config sections passed through three
signatures."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relay.learner.grpo_loss import LossSettings
from relay.learner.learner import JaxLearner
from relay.models.attention_choice import AttentionChoice, choose_attention
from relay.models.lora_spec import LoraSpec


@dataclass(frozen=True)
class LearnerSettings:
    """The learner's settings: the ``train`` section's, the loss (:class:`LossSettings`), the batch arithmetic of
    ``derived``, the mesh, the attention :func:`choose_attention` resolved, LoRA and what a weight sync sends."""

    optimizer: Mapping[str, Any]  # train.optimizer
    loss: LossSettings
    micro_batch_size: int  # derived: this process's sequences (packed rows) per micro-batch
    mini_batch_sequences: int  # derived.local_mini_batch
    total_optimizer_steps: int
    warmup_steps: int
    mesh: Mapping[str, int]  # learner.mesh
    remat: bool
    compute_dtype: str
    packing: bool
    pack_width: int  # derived.pack_width
    length_bucket: int
    share_prompts: bool
    attention: AttentionChoice
    max_consecutive_skips: int
    epochs: int  # train.ppo_epochs
    lora: LoraSpec | None  # model.lora
    seed: int  # trainer.seed: the adapters' initialisation and dropout
    weight_sync_dtype: str  # derived.weight_sync_dtype
    collective_timeout_s: float | None  # learner.collective_timeout_s (several hosts)

    @classmethod
    def from_config(cls, cfg: Any, derived: Mapping[str, Any]) -> LearnerSettings:
        """From a merged config and its ``derived`` block (:meth:`relay.config.derive.Derived.as_dict`)."""
        t, lr = cfg.train, cfg.learner
        return cls(
            optimizer=_plain(t.optimizer),
            loss=loss_settings(cfg, derived),
            micro_batch_size=int(derived["micro_batch_size"]),
            mini_batch_sequences=int(derived["local_mini_batch"]),
            total_optimizer_steps=int(derived["total_optimizer_steps"]),
            warmup_steps=int(derived["warmup_steps"]),
            mesh=_plain(lr.mesh),
            remat=bool(t.remat),
            compute_dtype=str(t.compute_dtype),
            packing=bool(t.packing),
            pack_width=int(derived["pack_width"]),
            length_bucket=int(t.length_bucket),
            share_prompts=bool(t.share_prompts),
            attention=choose_attention(str(t.attention), str(lr.accelerator), str(t.compute_dtype)),
            max_consecutive_skips=int(t.max_consecutive_skips),
            epochs=int(t.ppo_epochs),
            lora=LoraSpec.from_config(cfg.model.get("lora")),
            seed=int(cfg.trainer.seed),
            weight_sync_dtype=str(derived["weight_sync_dtype"]),
            collective_timeout_s=lr.get("collective_timeout_s"),
        )


def loss_settings(cfg: Any, derived: Mapping[str, Any]) -> LossSettings:
    """The learner's objective: GRPO's from ``algorithm`` at the rollout's temperature, or with ``sft.enable`` the
    supervised one (:mod:`relay.learner.sft_loss`) at temperature 1 (the model's own distribution), with no KL,
    reference or old log-probs."""
    if cfg.sft.enable:
        return LossSettings(0.0, 0.0, 0.0, "low_var_kl", 1.0, old_from_batch=False, objective="sft")
    return LossSettings.from_config(_plain(cfg.algorithm), derived, float(cfg.rollout.temperature))


def _plain(node: Any) -> dict:
    """A config node as a plain dict (picklable without the config library)."""
    from omegaconf import DictConfig, OmegaConf

    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)


def build_jax_learner(model_path: str, s: LearnerSettings) -> JaxLearner:
    """The :class:`JaxLearner` of ``s`` on every device of the JAX job."""
    return JaxLearner(
        model_path,
        s.optimizer,
        s.loss,
        micro_batch_size=s.micro_batch_size,
        mini_batch_sequences=s.mini_batch_sequences,
        total_optimizer_steps=s.total_optimizer_steps,
        warmup_steps=s.warmup_steps,
        mesh=s.mesh,
        remat=s.remat,
        compute_dtype=s.compute_dtype,
        packing=s.packing,
        pack_width=s.pack_width,
        length_bucket=s.length_bucket,
        share_prompts=s.share_prompts,
        attention=s.attention.implementation,
        max_consecutive_skips=s.max_consecutive_skips,
        lora=s.lora,
        lora_seed=s.seed,
        peer_timeout_s=s.collective_timeout_s,
    )
