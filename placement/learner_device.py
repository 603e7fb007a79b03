"""One learner device's memory: params, optimizer state, gradient buffers, one micro-batch's activations and logits.

The learner holds fp32 params, the optimizer state (adamw 2x params, lion 1x, sgd 0), the gradient buffers, the
activations of one micro-batch of ``train.micro_batch_size`` rows x ``W`` tokens and one chunk's logits, the
host copy of the weights made for a sync (object-store pages or the memory file), and the JAX runtime. This module
is the device part, from explicit settings and no config (``benchmarks.gpu.learner`` prints it beside a GPU's
measured peak, on a machine without Relay's config stack); :mod:`placement.learner_memory` reads the settings off
the config and adds the host lines.

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

from dataclasses import dataclass

from placement.memory_coefficients import COEFFICIENTS, OPTIMIZER_STATE, coefficient_bytes
from placement.model_shape import ModelShape


@dataclass(frozen=True)
class LearnerShape:
    """One learner device's share of a micro-batch: ``rows`` rows of ``width`` tokens, ``slots`` logits per row."""

    rows: int
    width: int
    slots: int
    shard: int  # params and optimizer state are split over fsdp x tp devices
    tp: int
    devices: int  # devices of this host (each holds its share)


@dataclass(frozen=True)
class LearnerSettings:
    """What the device estimate reads besides the shapes: ``trained`` parameters (all of them, or LoRA's adapters
    with ``lora``), ``reference``: a frozen copy of the model for the learner's own reference log-probs, ``scores``:
    the attention keeps ``[T, T]`` scores (every implementation but cuDNN's), ``device``: cpu, gpu or tpu."""

    compute_dtype: str
    remat: bool
    optimizer: str
    trained: int
    lora: bool = False
    reference: bool = False
    scores: bool = True
    device: str = "gpu"


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


def device_coefficients(device: str, remat: bool, lora: bool) -> tuple[float, float]:
    """``(gradient buffers per trained param, scale on the activations and logits)`` of a learner device. The XLA:GPU
    figures apply where they were measured, a GPU step with remat: full fine-tuning then keeps one gradient buffer
    (the layerwise accumulator), and XLA:GPU about half the temporaries. Everything else keeps the XLA:CPU fit.
    ``device_coefficients("gpu", True, False) == (1.0, 0.47)``; ``device_coefficients("cpu", True, False) == (1.9,
    1.0)``."""
    c = COEFFICIENTS
    if device != "gpu" or not remat:
        return c["learner_grad_buffers"], 1.0
    grads = c["learner_grad_buffers"] if lora else c["gpu_learner_grad_buffers_layerwise"]
    return grads, c["gpu_learner_temporaries_scale"]


def learner_device_bytes(shape: ModelShape, params: int, ls: LearnerShape, s: LearnerSettings) -> dict[str, float]:
    """Bytes per component on one learner device (``runtime``: the CUDA context on a GPU, else 0)."""
    state = 4.0 * params / ls.shard
    trained = 4.0 * s.trained / ls.shard
    act_bytes = 2 if s.compute_dtype == "bfloat16" else 4
    grad_buffers, temporaries = device_coefficients(s.device, s.remat, s.lora)
    activations = learner_activation_bytes(
        shape, ls.rows, ls.width, remat=s.remat, scores=s.scores, act_bytes=act_bytes
    )
    return {
        # LoRA: the frozen base plus the adapters; full fine-tuning: the params, and the reference copy if kept
        "weights": state + (trained if s.lora else 0.0) + (state if s.reference and not s.lora else 0.0),
        "optimizer": trained * OPTIMIZER_STATE.get(s.optimizer, 2),
        "grads": trained * grad_buffers,
        "activations": temporaries * (activations / ls.tp + coefficient_bytes("learner_fixed_gib")),
        "logits": temporaries * learner_logits_bytes(shape, ls.slots) / ls.tp,
        "runtime": coefficient_bytes("gpu_context_gib") if s.device == "gpu" else 0.0,
    }
