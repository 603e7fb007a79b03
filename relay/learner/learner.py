"""The JAX learner: flax Llama params + an optax optimizer, the GRPO update of a training step.

A step's batch is split into mini-batches (one optimizer step each, repeated ``ppo_epochs``
times); gradients of a mini-batch's micro-batches accumulate into its optimizer step. Every
micro-batch has the shape ``[micro_batch_size, P + R]`` and ``P``, ``R`` come from a few length
buckets, so the jitted gradient function is traced once per bucket, not once per step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from relay.learner.grpo_loss import LossSettings, micro_batch_loss
from relay.learner.optimizer import build_optimizer
from relay.models.hf_params import load_hf_checkpoint, params_to_hf
from relay.models.llama_config import LlamaConfig
from relay.models.llama_flax import LlamaForCausalLM

TRAIN_KEYS = ("input_ids", "attention_mask", "position_ids", "response_mask", "advantages", "ref_log_probs")


def _gap(a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> tuple[float, float]:
    diff = np.abs(a - b) * mask
    return float(diff.sum() / max(mask.sum(), 1.0)), float(diff.max(initial=0.0))


class JaxLearner:
    """Owns the policy parameters and optimizer state on the learner's JAX device."""

    def __init__(
        self,
        model_path: str,
        optimizer: dict[str, Any],
        loss: LossSettings,
        micro_batch_size: int,
        mini_batch_sequences: int | None = None,
        total_optimizer_steps: int = 1,
        warmup_steps: int = 0,
    ):
        """``optimizer`` is the ``train.optimizer`` section; ``mini_batch_sequences`` the sequences per
        optimizer step (None: the whole batch)."""
        self.config = LlamaConfig.from_pretrained(model_path)
        self.model = LlamaForCausalLM(self.config)
        self.params = jax.device_put(load_hf_checkpoint(model_path, self.config))
        self.tx, self.schedule = build_optimizer(optimizer, total_optimizer_steps, warmup_steps)
        self.opt_state = self.tx.init(self.params)
        self.optimizer_steps = 0
        self.loss_settings = loss
        self.micro_batch_size = micro_batch_size
        self.mini_batch_sequences = mini_batch_sequences
        self._grad_fns: dict[int, Callable] = {}
        self._apply = jax.jit(self._apply_updates, donate_argnums=(0, 1))
        self._accumulate = jax.jit(lambda acc, g: jax.tree_util.tree_map(jnp.add, acc, g), donate_argnums=(0,))

    def _apply_updates(self, params: dict, opt_state: optax.OptState, grads: dict):
        grad_norm = optax.tree.norm(grads)
        updates, opt_state = self.tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, grad_norm

    def _grad_fn(self, prompt_length: int) -> Callable:
        if prompt_length not in self._grad_fns:
            loss_fn = partial(
                micro_batch_loss, model=self.model, prompt_length=prompt_length, settings=self.loss_settings
            )
            self._grad_fns[prompt_length] = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))
        return self._grad_fns[prompt_length]

    def _check_batch(self, batch: dict[str, np.ndarray]) -> tuple[str, ...]:
        keys = TRAIN_KEYS + (("old_log_probs",) if self.loss_settings.old_from_batch else ())
        keys += ("rollout_log_probs",) if self.loss_settings.rollout_is_cap is not None else ()
        missing = [k for k in keys if k not in batch]
        if missing:
            raise KeyError(f"learner batch lacks {missing}")
        size = batch["input_ids"].shape[0]
        if size % self.micro_batch_size:
            raise ValueError(f"batch of {size} sequences is not divisible by micro_batch_size={self.micro_batch_size}")
        return keys

    def gradients(self, batch: dict[str, np.ndarray], prompt_length: int) -> tuple[dict, dict[str, float], np.ndarray]:
        """Gradients of ``batch``'s loss accumulated over micro-batches (params unchanged), the summed
        metrics, and the learner's log-probs ``[B, R]`` under the current params."""
        keys = self._check_batch(batch)
        size, mb = batch["input_ids"].shape[0], self.micro_batch_size
        global_tokens = jnp.float32(batch["response_mask"].sum())
        global_sequences = jnp.float32(size)
        grad_fn = self._grad_fn(prompt_length)
        grads, sums, log_probs = None, {}, []
        for lo in range(0, size, mb):
            micro = {k: jnp.asarray(batch[k][lo : lo + mb]) for k in keys}
            (_, aux), g = grad_fn(self.params, micro, global_tokens, global_sequences)
            grads = g if grads is None else self._accumulate(grads, g)
            log_probs.append(np.asarray(aux.pop("log_probs")))
            for k, v in aux.items():
                sums[k] = sums.get(k, 0.0) + float(v)
        return grads, sums, np.concatenate(log_probs, axis=0)

    def update(self, batch: dict[str, np.ndarray], prompt_length: int, epochs: int = 1) -> dict[str, float]:
        """``epochs`` passes over ``batch`` (all sequences of the training step), one optimizer step per
        mini-batch. Loss metrics are those of the first epoch's first mini-batch; the log-prob gaps use
        the first epoch's log-probs of every row (the weights of the mini-batch's optimizer step)."""
        size = batch["input_ids"].shape[0]
        mini = self.mini_batch_sequences or size
        if size % mini:
            raise ValueError(f"batch of {size} sequences does not split into mini-batches of {mini}")
        start = time.perf_counter()
        learner_log_probs: list[np.ndarray] = []
        first_sums: dict[str, float] = {}
        for epoch in range(epochs):
            for lo in range(0, size, mini):
                part = {k: v[lo : lo + mini] for k, v in batch.items()}
                grads, sums, log_probs = self.gradients(part, prompt_length)
                if epoch == 0:
                    learner_log_probs.append(log_probs)
                    first_sums = first_sums or sums
                lr = float(self.schedule(self.optimizer_steps))
                self.params, self.opt_state, grad_norm = self._apply(self.params, self.opt_state, grads)
                self.optimizer_steps += 1
        jax.block_until_ready(self.params)
        seconds = time.perf_counter() - start
        mask = batch["response_mask"]
        all_log_probs = np.concatenate(learner_log_probs, axis=0)
        metrics = {f"actor/{k}": v for k, v in first_sums.items()}
        metrics["actor/grad_norm"] = float(grad_norm)
        metrics["actor/lr"] = lr
        metrics["actor/optimizer_steps"] = float(self.optimizer_steps)
        metrics["timing/update_compute"] = seconds
        metrics["throughput/learner_tokens_per_s"] = float(batch["attention_mask"].sum()) * epochs / seconds
        for name, key in (("rollout", "rollout_log_probs"), ("actor", "old_log_probs")):
            if key in batch:
                gap_mean, gap_max = _gap(batch[key], all_log_probs, mask)
                metrics[f"logprob_gap/{name}_vs_learner_mean"] = gap_mean
                metrics[f"logprob_gap/{name}_vs_learner_max"] = gap_max
        return metrics

    def export_hf(self) -> dict[str, np.ndarray]:
        """Current weights under HF names as host arrays (may alias device buffers: ``ray.put`` or copy
        them before the next update donates those buffers)."""
        return params_to_hf(self.params)
