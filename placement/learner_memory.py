"""The learner's memory estimate from the config: the row shape of one device's micro-batch (:func:`learner_shape`),
the settings the device estimate reads (:mod:`placement.learner_device`, where the formula and its coefficients are
described), and the host lines: the copy of the weights a sync makes and the runtime.
"""

from __future__ import annotations

import math
from typing import Any

from placement.actor_memory import ActorMemory, EstimateInputs, components, config_value
from placement.learner_device import LearnerSettings, LearnerShape, learner_device_bytes
from placement.memory_coefficients import DTYPE_BYTES, coefficient_bytes
from placement.model_shape import lora_param_count
from placement.plan import ActorSlot, reference_in_learner
from relay.models.attention_choice import choose_attention, keeps_scores


def round_up(value: int, multiple: int) -> int:
    """``round_up(300, 64)`` -> 320."""
    m = max(int(multiple), 1)
    return -(-int(value) // m) * m


def mesh_sizes(cfg: Any) -> dict[str, int]:
    """``learner.mesh`` with its ``-1`` resolved over ``learner.hosts x learner.devices_per_host`` devices.

    Example: 2 hosts x 4 devices, ``{dp: -1, fsdp: 2, tp: 1}`` -> ``{dp: 4, fsdp: 2, tp: 1}``.
    """
    lr = cfg.learner
    devices = max(int(lr.hosts), 1) * max(int(lr.devices_per_host), 1)
    sizes = {a: int(config_value(lr.mesh, a, 1)) for a in ("dp", "fsdp", "tp")}
    fixed = math.prod(v for v in sizes.values() if v != -1)
    return {a: (devices // max(fixed, 1) if v == -1 else v) for a, v in sizes.items()}


def learner_shape(cfg: Any, micro_batch_size: int) -> LearnerShape:
    """Rows, width and logit slots of one device's micro-batch, from the config (packed rows when
    ``train.packing``; a padded sequence per row otherwise)."""
    d, t = cfg.data, cfg.train
    prompt = max(int(d.max_prompt_length), int(config_value(d, "min_padded_prompt_length", 0)))
    bucket = int(t.length_bucket)
    if config_value(t, "packing", False):
        width = int(config_value(t, "pack_width", 0)) or round_up(prompt + int(d.max_response_length), bucket)
        slots = width  # a packed row's response slots: at most its width
    else:
        width = round_up(prompt, bucket) + round_up(int(d.max_response_length), bucket)
        slots = round_up(int(d.max_response_length), bucket)
    mesh = mesh_sizes(cfg)
    hosts, per_host = max(int(cfg.learner.hosts), 1), max(int(cfg.learner.devices_per_host), 1)
    rows = max(1, math.ceil(micro_batch_size * hosts / max(mesh["dp"] * mesh["fsdp"], 1)))
    return LearnerShape(rows, width, slots, mesh["fsdp"] * mesh["tp"], mesh["tp"], per_host)


def scores_kept(cfg: Any) -> bool:
    """Whether the learner's attention keeps ``[T, T]`` scores: every implementation but cuDNN's fused kernel
    (``train.attention`` as the learner resolves it, :func:`relay.models.attention.choose_attention`)."""
    t = cfg.train
    setting = config_value(t, "attention", "xla")
    chosen = choose_attention(setting, str(cfg.learner.accelerator), str(config_value(t, "compute_dtype", "float32")))
    return keeps_scores(chosen.implementation)


def learner_memory(inp: EstimateInputs, slot: ActorSlot, ram: float | None = None) -> ActorMemory:
    """A learner process: its devices' shares (:func:`placement.learner_device.learner_device_bytes`), the host copy
    of a sync and the runtime; on the CPU every local device's share in RAM, on a GPU/TPU per accelerator."""
    cfg = inp.cfg
    t, shape = cfg.train, inp.policy
    ls = learner_shape(cfg, inp.micro_batch_size)
    lora = config_value(cfg.model, "lora")
    settings = LearnerSettings(
        compute_dtype=str(t.compute_dtype),
        remat=bool(t.remat),
        optimizer=str(t.optimizer.name),
        # With LoRA only the adapters have gradients and optimizer state; the frozen base is read, never copied.
        trained=lora_param_count(shape, lora) if lora is not None else inp.params,
        lora=lora is not None,
        reference=reference_in_learner(cfg),  # algorithm.ref_log_prob_source: a frozen copy in full fine-tuning
        scores=scores_kept(cfg),
        device=slot.device,
    )
    device = learner_device_bytes(shape, inp.params, ls, settings)
    runtime = device.pop("runtime")
    # export_hf: the full weights on the host in derived.weight_sync_dtype, in the object store or a memory file
    # (LoRA: the float32 adapters only)
    sync = DTYPE_BYTES[inp.weight_sync_dtype] * inp.params if lora is None else 4.0 * lora_param_count(shape, lora)
    if slot.device == "cpu":  # every (virtual) CPU device of the process holds its own share
        host = {k: v * ls.devices for k, v in device.items()}
        host.update(sync=sync, runtime=coefficient_bytes("learner_runtime_gib"))
        return ActorMemory(slot.name, "learner", "cpu", components(host), {})
    host = {"weights": 4.0 * inp.params, "sync": sync, "runtime": coefficient_bytes("gpu_host_runtime_gib")}
    accel = {**device, "runtime": runtime}
    note = (
        "GPU coefficients fitted to three H200 peaks (placement/memory_coefficients.py)"
        if slot.device == "gpu"
        else "device coefficients measured on XLA:CPU; a TPU compile differs (not run on a TPU)"
    )
    return ActorMemory(slot.name, "learner", slot.device, components(host), components(accel), (note,))
