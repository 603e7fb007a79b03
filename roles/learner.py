"""The learner role: the JAX/flax/optax GRPO update, then the new weights into Ray's object store."""

from __future__ import annotations

import time

import numpy as np
import ray

from relay.data_proto import DataProto
from relay.learner.grpo_loss import LossSettings
from relay.learner.learner import TRAIN_KEYS, JaxLearner, OptimizerSettings


class LearnerWorker:
    def __init__(self, model_path: str, learner_cfg: dict, algorithm_cfg: dict, temperature: float) -> None:
        import jax

        loss = LossSettings(
            clip_ratio_low=algorithm_cfg["clip_ratio_low"],
            clip_ratio_high=algorithm_cfg["clip_ratio_high"],
            kl_coef=algorithm_cfg["kl_loss_coef"],
            kl_type=algorithm_cfg["kl_loss_type"],
            temperature=temperature,
            old_from_batch=algorithm_cfg["old_log_prob_source"] == "actor",
        )
        opt = OptimizerSettings(
            lr=learner_cfg["lr"],
            weight_decay=learner_cfg["weight_decay"],
            b1=learner_cfg["adam_b1"],
            b2=learner_cfg["adam_b2"],
            eps=learner_cfg["adam_eps"],
            grad_clip=learner_cfg["grad_clip"],
        )
        self.learner = JaxLearner(model_path, opt, loss, learner_cfg["micro_batch_size"])
        self.epochs = learner_cfg["ppo_epochs"]
        self.devices = [str(d) for d in jax.devices()]
        self.version = 0

    def ready(self) -> dict:
        return {"role": "learner", "devices": self.devices}

    def update(self, data: DataProto) -> tuple[dict, ray.ObjectRef]:
        """One GRPO update on ``data``; returns metrics and a reference to the new HF-named weights
        (put into the object store once; every engine fetches the same copy)."""
        keys = [*TRAIN_KEYS, "rollout_log_probs"] + (
            ["old_log_probs"] if "old_log_probs" in data.batch else []
        )
        metrics = self.learner.update(
            {k: data.batch[k] for k in keys}, int(data.meta_info["prompt_length"]), self.epochs
        )
        start = time.perf_counter()
        weights = self.learner.export_hf()
        ref = ray.put(weights)
        self.version += 1
        metrics["sync/export_seconds"] = time.perf_counter() - start
        metrics["sync/bytes"] = float(sum(np.asarray(v).nbytes for v in weights.values()))
        return metrics, ref

    def weights_version(self) -> int:
        return self.version
