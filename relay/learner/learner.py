"""The JAX learner: flax Llama params + optax AdamW, one GRPO update per training step.

Gradients of the micro-batches accumulate into one optimizer step; each micro-batch has the
same shape ``[micro_batch_size, P + R]`` within a step and ``P``, ``R`` come from a few length
buckets, so the jitted gradient function is traced once per bucket, not once per step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from relay.learner.grpo_loss import LossSettings, micro_batch_loss
from relay.models.hf_params import load_hf_checkpoint, params_to_hf
from relay.models.llama_config import LlamaConfig
from relay.models.llama_flax import LlamaForCausalLM

TRAIN_KEYS = ("input_ids", "attention_mask", "position_ids", "response_mask", "advantages", "ref_log_probs")


@dataclass(frozen=True)
class OptimizerSettings:
    lr: float
    weight_decay: float = 0.0
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    grad_clip: float = 1.0


def build_optimizer(s: OptimizerSettings) -> optax.GradientTransformation:
    return optax.chain(
        optax.clip_by_global_norm(s.grad_clip),
        optax.adamw(s.lr, b1=s.b1, b2=s.b2, eps=s.eps, weight_decay=s.weight_decay),
    )


def _gap(a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> tuple[float, float]:
    diff = np.abs(a - b) * mask
    return float(diff.sum() / max(mask.sum(), 1.0)), float(diff.max(initial=0.0))


class JaxLearner:
    """Owns the policy parameters and optimizer state on the learner's JAX devices."""

    def __init__(
        self, model_path: str, optimizer: OptimizerSettings, loss: LossSettings, micro_batch_size: int
    ):
        self.config = LlamaConfig.from_pretrained(model_path)
        self.model = LlamaForCausalLM(self.config)
        self.params = jax.device_put(load_hf_checkpoint(model_path, self.config))
        self.tx = build_optimizer(optimizer)
        self.opt_state = self.tx.init(self.params)
        self.loss_settings = loss
        self.lr = optimizer.lr
        self.micro_batch_size = micro_batch_size
        self._grad_fns: dict[int, callable] = {}
        self._apply = jax.jit(self._apply_updates, donate_argnums=(0, 1))
        self._accumulate = jax.jit(
            lambda acc, g: jax.tree_util.tree_map(jnp.add, acc, g), donate_argnums=(0,)
        )

    def _apply_updates(self, params: dict, opt_state: optax.OptState, grads: dict):
        grad_norm = optax.global_norm(grads)
        updates, opt_state = self.tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, grad_norm

    def _grad_fn(self, prompt_length: int):
        if prompt_length not in self._grad_fns:
            loss_fn = partial(
                micro_batch_loss, model=self.model, prompt_length=prompt_length, settings=self.loss_settings
            )
            self._grad_fns[prompt_length] = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))
        return self._grad_fns[prompt_length]

    def _check_batch(self, batch: dict[str, np.ndarray]) -> tuple[str, ...]:
        keys = TRAIN_KEYS + (("old_log_probs",) if self.loss_settings.old_from_batch else ())
        missing = [k for k in keys if k not in batch]
        if missing:
            raise KeyError(f"learner batch lacks {missing}")
        size = batch["input_ids"].shape[0]
        if size % self.micro_batch_size:
            raise ValueError(
                f"batch of {size} sequences is not divisible by "
                f"learner.micro_batch_size={self.micro_batch_size}"
            )
        return keys

    def gradients(
        self, batch: dict[str, np.ndarray], prompt_length: int
    ) -> tuple[dict, dict[str, float], np.ndarray]:
        """Gradients of the whole batch's loss accumulated over micro-batches (params unchanged),
        the summed metrics, and the learner's log-probs ``[B, R]`` before any update."""
        keys = self._check_batch(batch)
        size, mb = batch["input_ids"].shape[0], self.micro_batch_size
        global_tokens = jnp.float32(batch["response_mask"].sum())
        grad_fn = self._grad_fn(prompt_length)
        grads, sums, log_probs = None, {}, []
        for lo in range(0, size, mb):
            micro = {k: jnp.asarray(batch[k][lo : lo + mb]) for k in keys}
            (_, aux), g = grad_fn(self.params, micro, global_tokens)
            grads = g if grads is None else self._accumulate(grads, g)
            log_probs.append(np.asarray(aux.pop("log_probs")))
            for k, v in aux.items():
                sums[k] = sums.get(k, 0.0) + float(v)
        return grads, sums, np.concatenate(log_probs, axis=0)

    def update(self, batch: dict[str, np.ndarray], prompt_length: int, epochs: int = 1) -> dict[str, float]:
        """Run ``epochs`` optimizer steps on ``batch`` (all sequences of the training step)."""
        start = time.perf_counter()
        for epoch in range(epochs):
            grads, sums, log_probs = self.gradients(batch, prompt_length)
            if epoch == 0:
                first_sums, learner_log_probs = sums, log_probs
            self.params, self.opt_state, grad_norm = self._apply(self.params, self.opt_state, grads)
        jax.block_until_ready(self.params)
        seconds = time.perf_counter() - start
        mask = batch["response_mask"]
        metrics = {f"actor/{k}": v for k, v in first_sums.items()}
        metrics["actor/grad_norm"] = float(grad_norm)
        metrics["actor/lr"] = self.lr
        metrics["timing/update_compute"] = seconds
        metrics["throughput/learner_tokens_per_s"] = float(batch["attention_mask"].sum()) * epochs / seconds
        gap_mean, gap_max = _gap(batch["rollout_log_probs"], learner_log_probs, mask)
        metrics["logprob_gap/rollout_vs_learner_mean"] = gap_mean
        metrics["logprob_gap/rollout_vs_learner_max"] = gap_max
        if "old_log_probs" in batch:
            gap_mean, gap_max = _gap(batch["old_log_probs"], learner_log_probs, mask)
            metrics["logprob_gap/actor_vs_learner_mean"] = gap_mean
            metrics["logprob_gap/actor_vs_learner_max"] = gap_max
        return metrics

    def export_hf(self) -> dict[str, np.ndarray]:
        """Current weights under HF names, as host float32 arrays (for the rollout/actor engines)."""
        return params_to_hf(self.params)
