"""The actor+ref role: reference per-token log-probs, and old-policy ones from a synced actor copy."""

from __future__ import annotations

import os
import time

import numpy as np

from relay.data_proto import DataProto
from roles.env import apply_torch_threads, peak_rss_gib

INPUT_KEYS = ("input_ids", "attention_mask", "position_ids")


class ActorRefWorker:
    """``ref`` is the frozen initial policy; ``actor`` (only when ``with_actor``) follows the learner."""

    def __init__(
        self,
        model_path: str,
        micro_batch_size: int,
        threads: int,
        with_actor: bool,
        device: str = "cpu",
        ref_param_offload: bool = False,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        self.threads = apply_torch_threads(threads)
        # On a GPU the actor sees only its own device(s) (CUDA_VISIBLE_DEVICES from Ray or the colocation owner).
        self.device = "cuda" if device == "gpu" else "cpu"

        def load() -> torch.nn.Module:
            return AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).to(self.device).eval()

        self.ref = load()
        # On a GPU shared with the learner, the frozen ref model waits in host memory between its passes.
        self.offload_ref = ref_param_offload and self.device == "cuda"
        if self.offload_ref:
            self.ref.to("cpu")
        self.actor = load() if with_actor else None
        self.micro_batch_size = micro_batch_size
        self.weights_version = 0  # of the actor copy: the driver checks it (a restarted actor starts at 0)

    def ready(self) -> dict:
        return {
            "role": "actor_ref",
            "threads": self.threads,
            "device": self.device,
            "with_actor": self.actor is not None,
            "pid": os.getpid(),
        }

    def compute_log_probs(self, data: DataProto) -> DataProto:
        """Adds ``ref_log_probs`` [B, R] (and ``old_log_probs`` [B, R] with an actor copy)."""
        from relay.engines.torch_logprobs import response_log_probs

        prompt_length = int(data.meta_info["prompt_length"])
        temperature = float(data.meta_info["temperature"])
        args = [data.batch[k] for k in INPUT_KEYS]
        start = time.perf_counter()
        if self.offload_ref:
            self.ref.to(self.device)
        out = {"ref_log_probs": response_log_probs(self.ref, *args, prompt_length, temperature, self.micro_batch_size)}
        if self.offload_ref:
            self.ref.to("cpu")
        metrics = {}
        if self.actor is not None:
            out["old_log_probs"] = response_log_probs(
                self.actor, *args, prompt_length, temperature, self.micro_batch_size
            )
            mask = data.batch["response_mask"]
            diff = np.abs(out["old_log_probs"] - data.batch["rollout_log_probs"]) * mask
            metrics["logprob_gap/rollout_vs_actor_mean"] = float(diff.sum() / max(mask.sum(), 1.0))
            metrics["logprob_gap/rollout_vs_actor_max"] = float(diff.max(initial=0.0))
        seconds = time.perf_counter() - start
        passes = 1 + (self.actor is not None)
        metrics["timing/actor_ref_compute"] = seconds
        metrics["memory/actor_ref_peak_rss_gib"] = peak_rss_gib()
        metrics["throughput/actor_ref_tokens_per_s"] = passes * float(data.batch["attention_mask"].sum()) / seconds
        meta = {"metrics": metrics}
        if self.actor is not None:
            meta["actor_weights_version"] = self.weights_version
        return DataProto.from_dict(batch=out, meta_info=meta)

    def load_weights(self, weights: dict[str, np.ndarray], version: int) -> dict:
        """Sync the actor copy (no-op without one: the ref model never changes)."""
        from relay.engines.torch_logprobs import load_named_tensors

        if self.actor is None:
            return {"seconds": 0.0, "bytes": 0}
        start = time.perf_counter()
        nbytes = load_named_tensors(self.actor, weights)
        self.weights_version = version
        return {"seconds": time.perf_counter() - start, "bytes": nbytes}
