"""The learner's memory estimate: params, optimizer state, gradient buffers, one micro-batch's activations and logits.

The learner holds fp32 params, the optimizer state (adamw 2x params, lion 1x, sgd 0), the gradient buffers, the
activations of one micro-batch of ``train.micro_batch_size`` rows x ``W`` tokens and one chunk's logits, the
host copy of the weights made for a sync (object-store pages or the memory file), and the JAX runtime.

Learner activations per decoder layer, bytes, for ``rows`` rows of width ``W`` (``derived.pack_width``:
``data.max_prompt_length + data.max_response_length`` rounded up to ``train.length_bucket``)::

    4 * rows * W * (act_hidden * hidden + act_intermediate * intermediate)
  + 4 * rows * heads * W**2 * act_scores          (attention scores; 0 with cuDNN's fused kernel)

times ``num_hidden_layers``; the LM head adds ``4 * K * vocab * logits_copies`` (one row at a time, ``K``
slots). ``train.remat`` keeps only each layer's input (the layers run as one scan over params stored stacked,
recomputed in the backward pass). Every coefficient is in :data:`placement.memory_coefficients.COEFFICIENTS`, with
where it was measured; ``tests/placement/test_memory.py`` compares the learner line with XLA's ``memory_analysis``.

Worked example (the default job, SmolLM2-135M, 134.5M params, on this 2-core CPU machine): the learner's
micro-batch is 4 rows x 512 tokens, so its activations are 30 x 0.16 GiB, its logits one row of
512 x 49152 floats x 3.5 copies = 0.33 GiB, params 0.50 GiB, adamw 1.0 GiB, gradient buffers 0.95 GiB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from placement.actor_memory import ActorMemory, EstimateInputs, components, config_value
from placement.memory_coefficients import COEFFICIENTS, OPTIMIZER_STATE, coefficient_bytes
from placement.model_shape import ModelShape, lora_param_count
from placement.plan import ActorSlot, reference_in_learner
from relay.models.attention_choice import choose_attention, keeps_scores


def round_up(value: int, multiple: int) -> int:
    """``round_up(300, 64)`` -> 320."""
    m = max(int(multiple), 1)
    return -(-int(value) // m) * m


@dataclass(frozen=True)
class LearnerShape:
    """One learner device's share of a micro-batch: ``rows`` rows of ``width`` tokens, ``slots`` logits per row."""

    rows: int
    width: int
    slots: int
    shard: int  # params and optimizer state are split over fsdp x tp devices
    tp: int
    devices: int  # devices of this host (each holds its share)


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


def learner_activation_bytes(
    shape: ModelShape,
    rows: int,
    width: int,
    *,
    remat: bool = False,
    scores: bool = True,
    act_bytes: int = 4,
) -> float:
    """Activations of one micro-batch's forward + backward through every decoder layer, bytes.

    Worked example (SmolLM2, 4 rows x 512): 4 x 2048 x (13.6 x 576 + 4.0 x 1536) + 4 x 4 x 9 x 512**2 x 1.44
    = 0.107 + 0.051 GiB per layer; x 30 layers = 4.72 GiB.
    """
    c = COEFFICIENTS
    tokens = rows * width
    linear = (
        act_bytes
        * tokens
        * (c["learner_act_hidden"] * shape.hidden + c["learner_act_intermediate"] * shape.intermediate)
    )
    quadratic = 4 * rows * shape.heads * width * width * c["learner_act_scores"] if scores else 0.0
    per_layer = linear + quadratic
    if not remat:
        return shape.layers * per_layer
    kept = act_bytes * tokens * shape.hidden * c["learner_remat_floats_per_hidden"]
    return shape.layers * kept + per_layer  # one layer recomputed at a time


def learner_logits_bytes(shape: ModelShape, slots: int) -> float:
    """The LM head's logits of one row (the learner applies it row by row), bytes."""
    return 4.0 * slots * shape.vocab * COEFFICIENTS["learner_logits_copies"]


def learner_memory(inp: EstimateInputs, slot: ActorSlot) -> ActorMemory:
    """A learner process: its share of the params (and the reference copy when it computes the reference
    log-probs), optimizer state, gradient buffers, one micro-batch's activations and logits, the host copy of a
    sync and the runtime; on the CPU every local device's share in RAM, on a GPU/TPU per accelerator."""
    cfg = inp.cfg
    t, shape = cfg.train, inp.policy
    ls = learner_shape(cfg, inp.micro_batch_size)
    state = 4.0 * inp.params / ls.shard
    lora = config_value(cfg.model, "lora")
    # With LoRA only the adapters have gradients and optimizer state; the frozen base is read, never copied.
    trained = 4.0 * lora_param_count(shape, lora) / ls.shard if lora is not None else state
    on_cpu = slot.device == "cpu"
    act_bytes = 2 if t.compute_dtype == "bfloat16" else 4
    # The learner's own reference in full fine-tuning (algorithm.ref_log_prob_source): a frozen copy of the model.
    reference = state if lora is None and reference_in_learner(cfg) else 0.0
    device = {
        "weights": state + (trained if lora is not None else 0.0) + reference,
        "optimizer": trained * OPTIMIZER_STATE.get(str(t.optimizer.name), 2),
        "grads": trained * COEFFICIENTS["learner_grad_buffers"],
        "activations": learner_activation_bytes(
            shape,
            ls.rows,
            ls.width,
            remat=bool(t.remat),
            scores=scores_kept(cfg),
            act_bytes=act_bytes,
        )
        / ls.tp
        + coefficient_bytes("learner_fixed_gib"),
        "logits": learner_logits_bytes(shape, ls.slots) / ls.tp,
    }
    runtime = coefficient_bytes("learner_runtime_gib")
    # export_hf: the full weights on the host, in the object store or a memory file (LoRA: the adapters only)
    sync = 4.0 * (inp.params if lora is None else lora_param_count(shape, lora))
    if on_cpu:  # every (virtual) CPU device of the process holds its own share
        host = {k: v * ls.devices for k, v in device.items()}
        host.update(sync=sync, runtime=runtime)
        return ActorMemory(slot.name, "learner", "cpu", components(host), {})
    host = {"weights": 4.0 * inp.params, "sync": sync, "runtime": coefficient_bytes("gpu_host_runtime_gib")}
    accel = {**device, "runtime": coefficient_bytes("gpu_context_gib") if slot.device == "gpu" else 0.0}
    note = "device coefficients measured on XLA:CPU; a GPU/TPU compile differs (remat, fused attention)"
    return ActorMemory(slot.name, "learner", slot.device, components(host), components(accel), (note,))
