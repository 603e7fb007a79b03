"""The learner role: the JAX/flax/optax GRPO update, then the new weights for the engines: a memory file on
this node (``relay/shared_weights.py``) or Ray's object store (``trainer.weight_sync``)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np
import ray

from relay.data_proto import DataProto
from relay.engines.lora_payload import adapter_payload
from relay.faults import fault_point
from relay.learner.inputs import LEARNER_INPUTS
from relay.learner.settings import LearnerSettings, build_jax_learner
from relay.learner.watchdog import PhaseWatchdog
from relay.metrics import system as sm
from relay.metrics import validation as vm
from relay.process_identity import process_identity
from relay.shared_weights import SharedWeights, WeightPublisher
from relay.startup import start_up_with_collector_paused
from roles.env import memory_metrics


@dataclass(frozen=True)
class JaxJob:
    """A learner host's place in the JAX job across the hosts: the coordinator's ``ip:port`` (the driver picks it
    on learner-0's node), the process count and this process's id."""

    coordinator: str
    num_processes: int
    process_id: int


def join_jax_job(job: JaxJob | None) -> None:
    """One JAX job across the learner hosts (None on one host): joined before any other JAX call. On CPU the
    cross-process collectives use gloo."""
    import jax

    if job is None:
        return
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=job.coordinator, num_processes=job.num_processes, process_id=job.process_id
    )


def startup_messages(settings: LearnerSettings) -> list[str]:
    """What the learner says at start-up about the settings that change what it computes: the attention
    implementation and why, the LoRA adapters and where the reference log-probs come from."""
    messages = [settings.attention.message()]
    lora = settings.lora
    if lora is not None:
        messages.append(
            f"model.lora: rank {lora.rank} on {', '.join(lora.target_modules)}; a weight sync sends only "
            "the adapters (relay/engines/lora_payload.py)"
        )
    if settings.loss.ref_in_learner:
        messages.append(
            "reference log-probs: computed by the learner before each optimizer step, from "
            + ("the base weights, adapters off" if lora is not None else "a frozen copy of the initial weights")
            + " (algorithm.ref_log_prob_source; no actor_ref actor for them)"
        )
    return messages


class LearnerWorker:
    """Built from :class:`relay.learner.settings.LearnerSettings` (the driver resolves them once from the config);
    ``job`` (several hosts) is this host's place in the JAX job."""

    @start_up_with_collector_paused
    def __init__(self, model_path: str, settings: LearnerSettings, job: JaxJob | None = None) -> None:
        from relay.run.logs import apply_role_log
        from roles.env import apply_cpu_affinity

        apply_role_log()  # library output to outputs/<run>/logs/<actor>.log (relay.run.logs)
        apply_cpu_affinity()  # before XLA sizes its thread pool from the affinity mask
        import jax

        join_jax_job(job)
        self.learner = build_jax_learner(model_path, settings)
        for message in startup_messages(settings):
            print(message, flush=True)
        self.epochs = settings.epochs
        self.sync_dtype = settings.weight_sync_dtype  # the rollout engine's dtype where nothing needs float32
        self.devices = [str(d) for d in jax.local_devices()]
        self.process = {"index": jax.process_index(), "count": jax.process_count(), "devices": jax.device_count()}
        # Several hosts: a phase that waits on a dead or stopped peer ends this process (relay/learner/watchdog.py).
        self.watchdog = PhaseWatchdog(settings.collective_timeout_s, self.process["index"], self.process["count"])
        self.version = 0
        self.node_id = ray.get_runtime_context().get_node_id()
        self.publisher = WeightPublisher(self.node_id)
        self.weight_sync = "object_store"  # the driver sets the resolved trainer.weight_sync once roles are up

    def ready(self) -> dict:
        return {
            "role": "learner",
            "devices": self.devices,
            "process": self.process,
            **process_identity(),
            "node_id": self.node_id,
        }

    def set_weight_sync(self, mode: str) -> None:
        """``shared_memory`` or ``object_store``: how :meth:`update` and :meth:`load_checkpoint` publish weights."""
        if mode not in ("shared_memory", "object_store"):
            raise ValueError(f"weight sync {mode!r}: must be shared_memory or object_store")
        self.weight_sync = mode

    def release_weights(self, handle: SharedWeights) -> bool:
        """Close a published memory file that no role needs any more (the driver dropped its handle)."""
        return self.publisher.release(handle)

    def _publish(self, weights: dict[str, np.ndarray]) -> ray.ObjectRef | SharedWeights | None:
        """Rank 0's weights for the engines: a memory-file handle or an object-store ref (other ranks: None)."""
        if self.process["index"] != 0:
            return None
        if self.weight_sync == "shared_memory":
            return self.publisher.publish(weights, self.version)
        return ray.put(weights)

    def _sync_weights(self) -> dict[str, np.ndarray]:
        """What a weight sync sends: the HF-named weights in ``derived.weight_sync_dtype``, or with LoRA only the
        adapters (PEFT names + scaling, :func:`relay.engines.lora_payload.adapter_payload`). Every rank calls it (a
        gather on several hosts)."""
        if self.learner.lora is None:
            return self.learner.export_hf(self.sync_dtype)
        return adapter_payload(self.learner.export_adapters(), self.learner.lora.scaling)

    def update(self, data: DataProto, publish: bool = True) -> tuple[ray.ObjectRef | SharedWeights | None, dict]:
        """One update on ``data`` (this host's rows): ``(weights, metrics)``, the weights on rank 0 a reference
        to the new HF-named weights (published once, see :meth:`_publish`; every engine reads the same copy).
        ``publish=False`` (a warm start: no engine reads them) skips the export: ``(None, metrics)``.
        On several hosts every rank must be called together: the update and the export are collectives."""
        keys = [k for k in LEARNER_INPUTS if k in data.batch]  # a missing required key: loss_inputs says which
        fault_point("learner.update", int(data.meta_info.get("step", -1)))
        with self.watchdog.phase("update"):
            metrics = self.learner.update(
                {k: data.batch[k] for k in keys}, int(data.meta_info["prompt_length"]), self.epochs
            )
        if not publish:
            self.version += 1
            metrics.update(memory_metrics("learner"))
            return None, metrics
        start = time.perf_counter()
        with self.watchdog.phase("weight export after the update"):
            weights = self._sync_weights()
        # The new weights into a memory file or the object store: a full /dev/shm or store fails here, after the
        # optimizer step was applied (relay/faults.py's enospc at this point stands for it).
        fault_point("learner.publish", int(data.meta_info.get("step", -1)))
        self.version += 1
        ref = self._publish(weights)
        metrics[sm.SYNC_EXPORT_SECONDS] = time.perf_counter() - start
        metrics[sm.SYNC_PUBLISHED_FILES] = self.publisher.open_bytes / 2**30  # memory files not yet released
        metrics[sm.SYNC_BYTES] = float(sum(np.asarray(v).nbytes for v in weights.values()))
        metrics.update(memory_metrics("learner"))
        return ref, metrics

    def validation_loss(self, data: DataProto) -> dict:
        """The loss of ``data`` (this host's rows) under the current weights, no update: ``val/loss`` and the
        objective's other figures as ``val/*``. On several hosts every rank must be called together."""
        keys = [k for k in LEARNER_INPUTS if k in data.batch]
        with self.watchdog.phase("validation loss"):
            sums = self.learner.evaluate_loss({k: data.batch[k] for k in keys}, int(data.meta_info["prompt_length"]))
        return {vm.VAL_PREFIX + k: v for k, v in sums.items()}

    def save_checkpoint(
        self, directory: str, export_hf_to: str | None = None, base_model_dir: str = "", step: int = -1
    ) -> dict:
        """Write the learner state into ``directory`` (all ranks call; rank 0 writes) and, when asked,
        the policy into ``export_hf_to``: an HF checkpoint, or with LoRA a PEFT adapter for ``base_model_dir``
        (:mod:`relay.checkpoint.peft_export`). ``step``: the checkpoint's next step (its fault point's step)."""
        from relay.checkpoint import export_hf_checkpoint
        from relay.checkpoint.peft_export import export_peft_adapter
        from relay.learner.checkpointing import gather_learner_state, write_learner_state
        from relay.models.lora import peft_config
        from relay.models.paths import portable_model_name

        start = time.perf_counter()
        with self.watchdog.phase("checkpoint gather"):  # the writing below waits on no other host: no deadline
            state = gather_learner_state(self.learner)
        counters = write_learner_state(directory, state)
        fault_point("learner.save_checkpoint", step)  # between the learner's files and the HF export
        if export_hf_to:
            lora = self.learner.lora
            # Every rank gathers (a collective on several hosts); rank 0 writes.
            with self.watchdog.phase("checkpoint export"):
                tensors = self.learner.export_adapters() if lora else self.learner.export_hf()
            if self.process["index"] == 0 and lora:
                export_peft_adapter(export_hf_to, tensors, peft_config(lora, portable_model_name(base_model_dir)))
            elif self.process["index"] == 0:
                export_hf_checkpoint(export_hf_to, tensors, base_model_dir)
        return {"seconds": time.perf_counter() - start, **counters}

    def load_checkpoint(self, directory: str) -> ray.ObjectRef | None:
        """Restore the learner state saved by :meth:`save_checkpoint`; rank 0 returns the restored
        weights (in the object store) for the rollout engines and the actor copy."""
        from relay.checkpoint.store import STEP_DIR
        from relay.learner.checkpointing import load_learner

        step = STEP_DIR.match(os.path.basename(os.path.dirname(os.path.normpath(directory))))  # step_N/learner
        fault_point("learner.load_checkpoint", int(step.group(1)) if step else -1)  # inside --resume's load
        load_learner(self.learner, directory)  # every host reads the files itself
        with self.watchdog.phase("weight export after a checkpoint load"):
            weights = self._sync_weights()
        return self._publish(weights)
