"""The actor+ref role: reference per-token log-probs, and old-policy ones from a synced actor copy.

It holds only the models someone reads: the frozen reference when the KL loss or the KL penalty in the
reward is on (``reference``), the actor copy when ``algorithm.old_log_prob_source=actor`` (``actor_copy``).
With neither, the placement plan starts no actor_ref actor at all (:func:`placement.plan.actor_ref_needed`).
Both forwards share one packing of the batch's real tokens (:mod:`relay.engines.torch_packing`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from placement.plan import ACTOR_REF_DTYPE
from relay.data_proto import DataProto
from relay.faults import fault_point
from relay.metrics import policy as pm
from relay.metrics import system as sm
from relay.process_identity import process_identity
from relay.run.logs import apply_role_log
from relay.shared_weights import SharedWeights, opened_weights
from relay.startup import start_up_with_collector_paused
from roles.env import apply_cpu_affinity, apply_torch_threads, memory_metrics

INPUT_KEYS = ("input_ids", "attention_mask", "position_ids")


@dataclass(frozen=True)
class ActorRefSettings:
    """What an actor_ref rank is built with (the driver's :func:`driver.role_settings.actor_ref_settings` reads them
    from the ``actor_ref`` section and the algorithm): ``reference`` loads the frozen reference model (a KL term
    reads it and the learner does not compute it), ``actor_copy`` an actor copy that follows the learner
    (``algorithm.old_log_prob_source=actor``); ``device`` is ``cpu`` or ``gpu``; ``threads`` 0 is every core."""

    model_path: str
    micro_batch_size: int
    reference: bool = True
    actor_copy: bool = False
    threads: int = 0
    device: str = "cpu"
    ref_param_offload: bool = False  # on a GPU shared with the learner, the reference waits in host memory
    share_prompts: bool = False  # a group's samples share one copy of its prompt (actor_ref.share_prompts)


class ActorRefWorker:
    """``ref`` is the frozen initial policy (None without ``settings.reference``); ``actor`` (only with
    ``settings.actor_copy``) follows the learner."""

    @start_up_with_collector_paused
    def __init__(self, settings: ActorRefSettings) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        apply_role_log()  # library output to outputs/<run>/logs/<actor>.log (relay.run.logs)
        apply_cpu_affinity()
        if not (settings.reference or settings.actor_copy):
            raise ValueError("actor_ref with neither a reference model nor an actor copy has nothing to compute")
        self.threads = apply_torch_threads(settings.threads)
        # On a GPU the actor sees only its own device(s) (CUDA_VISIBLE_DEVICES from Ray or the colocation owner).
        self.device = "cuda" if settings.device == "gpu" else "cpu"

        def load() -> torch.nn.Module:
            # sdpa honours the block-diagonal 4D mask of the packed forward.
            dtype = getattr(torch, ACTOR_REF_DTYPE)
            model = AutoModelForCausalLM.from_pretrained(settings.model_path, dtype=dtype, attn_implementation="sdpa")
            return model.to(self.device).eval()

        self.ref = load() if settings.reference else None
        # On a GPU shared with the learner, the frozen ref model waits in host memory between its passes.
        self.offload_ref = settings.reference and settings.ref_param_offload and self.device == "cuda"
        if self.offload_ref:
            self.ref.to("cpu")
        self.actor = load() if settings.actor_copy else None
        self.micro_batch_size = settings.micro_batch_size
        self.share_prompts = settings.share_prompts
        self.weights_version = 0  # of the actor copy: the driver checks it (a restarted actor starts at 0)
        self.model_path = settings.model_path
        self._merger: Any = None  # the frozen base of a LoRA run (relay.engines.lora_payload.BaseMerger)

    def ready(self) -> dict:
        return {
            "role": "actor_ref",
            "threads": self.threads,
            "device": self.device,
            "with_ref": self.ref is not None,
            "with_actor": self.actor is not None,
            **process_identity(),
        }

    def compute_log_probs(self, data: DataProto) -> DataProto:
        """Adds ``ref_log_probs`` [B, R] with a reference model and ``old_log_probs`` [B, R] with an actor copy.

        Metrics: ``actor_ref/ref_forward`` (1.0 when the reference forward ran), ``batch/padding_share_actor_ref``
        (padded token slots / slots computed by one forward pass), ``throughput/actor_ref_tokens_per_s`` (real
        tokens of every pass per second), ``timing/actor_ref_compute``, and the rollout-vs-actor gap.
        """
        from relay.engines.torch_logprobs import check_positions, packed_log_probs
        from relay.engines.torch_packing import plan_packing, shared_prompt_rows

        fault_point("actor_ref.compute_log_probs", int(data.meta_info.get("step", -1)))
        start = time.perf_counter()
        ids, mask, positions = (data.batch[k] for k in INPUT_KEYS)
        prompt_length = int(data.meta_info["prompt_length"])
        if self.share_prompts:
            width, rows_per_forward = shared_prompt_rows(ids, mask, prompt_length, self.micro_batch_size)
            plan = plan_packing(mask, prompt_length, width, input_ids=ids)
        else:
            plan, rows_per_forward = plan_packing(mask, prompt_length), self.micro_batch_size
        check_positions(plan, positions)
        temperature = float(data.meta_info["temperature"])

        def score(model: Any) -> np.ndarray:
            return packed_log_probs(model, plan, ids, temperature, rows_per_forward)

        out = {}
        if self.ref is not None:
            out["ref_log_probs"] = self._ref_log_probs(score)
        metrics = {pm.ACTOR_REF_REF_FORWARD: float(self.ref is not None)}
        if self.actor is not None:
            out["old_log_probs"] = score(self.actor)
            metrics.update(
                rollout_gap(out["old_log_probs"], data.batch["rollout_log_probs"], data.batch["response_mask"])
            )
        seconds = time.perf_counter() - start
        passes = (self.ref is not None) + (self.actor is not None)
        metrics[sm.TIMING_ROLE_COMPUTE.format(role="actor_ref")] = seconds
        metrics.update(memory_metrics("actor_ref"))
        metrics[sm.THROUGHPUT_ACTOR_REF] = passes * float(mask.sum()) / seconds  # the sequences' tokens
        metrics[pm.BATCH_PADDING_SHARE_ACTOR_REF] = plan.padding_share(rows_per_forward)
        metrics[pm.BATCH_SHARED_PROMPT_SHARE_ACTOR_REF] = plan.shared_prompt_share
        meta = {"metrics": metrics}
        if self.actor is not None:
            meta["actor_weights_version"] = self.weights_version
        return DataProto.from_dict(batch=out, meta_info=meta)

    def _ref_log_probs(self, score: Callable[[Any], np.ndarray]) -> np.ndarray:
        """The reference forward, with the ref model on the device only for its duration when offloaded."""
        if self.offload_ref:
            self.ref.to(self.device)
        try:
            return score(self.ref)
        finally:
            if self.offload_ref:
                self.ref.to("cpu")

    def load_weights(self, weights: dict[str, np.ndarray] | SharedWeights, version: int) -> dict:
        """Sync the actor copy (no-op without one: the ref model never changes) from the object store's copy
        or the learner's memory file (``trainer.weight_sync``)."""
        fault_point("actor_ref.load_weights", version - 1)
        import ray

        from relay.engines.lora_payload import BaseMerger, is_adapter_payload
        from relay.engines.torch_logprobs import load_named_tensors
        from relay.shared_weights import weights_nbytes

        if self.actor is None:
            return {"seconds": 0.0, "bytes": 0}
        start = time.perf_counter()
        with opened_weights(weights, ray.get_runtime_context().get_node_id()) as tensors:
            if is_adapter_payload(tensors):  # LoRA: the adapters only, merged into the frozen base here
                if self._merger is None:
                    self._merger = BaseMerger(self.model_path)
                load_named_tensors(self.actor, self._merger.merged(tensors))
                nbytes = weights_nbytes(tensors)
            else:
                nbytes = load_named_tensors(self.actor, tensors)
        self.weights_version = version
        return {"seconds": time.perf_counter() - start, "bytes": nbytes}


def rollout_gap(old_log_probs: np.ndarray, rollout_log_probs: np.ndarray, response_mask: np.ndarray) -> dict:
    """Mean and max |actor copy - rollout| log-prob over response tokens."""
    diff = np.abs(old_log_probs - rollout_log_probs) * response_mask
    return {
        pm.LOGPROB_GAP_ROLLOUT_VS_ACTOR_MEAN: float(diff.sum() / max(response_mask.sum(), 1.0)),
        pm.LOGPROB_GAP_ROLLOUT_VS_ACTOR_MAX: float(diff.max(initial=0.0)),
    }
