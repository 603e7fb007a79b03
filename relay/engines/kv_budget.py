"""The KV cache one rollout step needs (``rollout.kv_cache_gib: auto``).

vLLM allocates its KV cache up front, in blocks of ``block_size`` token slots per layer (128 on the CPU backend,
16 on GPUs). A step generates ``sequences`` responses at once; each of them can grow to ``max_model_len`` tokens,
so the step never waits for a block (and vLLM never preempts a sequence) when every sequence can hold
``ceil(max_model_len / block_size)`` blocks. The prompts of a group share their blocks through prefix caching,
so this is an upper bound.

Worked example, SmolLM2-135M (30 layers, 3 KV heads of 64) in float32, the default job's 16 sequences of at most
256 + 256 tokens on the CPU: ``16 x 512 x 30 x 2 x 3 x 64 x 4`` bytes = 0.35 GiB, where a fixed 0.6 GiB held 0.25
GiB nobody used (and vLLM's memory fraction of a 24 GiB node ~7 GiB).
"""

from __future__ import annotations

import math

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
CPU_BLOCK_SIZE = 128  # vLLM's CPU attention backend (vllm/platforms/cpu.py)
GPU_BLOCK_SIZE = 16
GIB = 2**30


def step_kv_cache_gib(
    layers: int,
    kv_heads: int,
    head_dim: int,
    dtype: str,
    sequences: int,
    max_model_len: int,
    block_size: int = CPU_BLOCK_SIZE,
) -> float:
    """GiB of KV cache for ``sequences`` sequences of up to ``max_model_len`` tokens, whole blocks each; a token
    takes ``layers x 2 (K and V) x kv_heads x head_dim`` values of ``dtype``.

    SmolLM2-135M (30 layers, 3 KV heads of 64): the default job's 16 x 512 tokens, the benchmark's 32 x 384:

    >>> default_job, benchmark = (30, 3, 64, "float32", 16, 512), (30, 3, 64, "float32", 32, 384)
    >>> round(step_kv_cache_gib(*default_job), 4), round(step_kv_cache_gib(*benchmark), 4)
    (0.3516, 0.5273)
    """
    tokens = math.ceil(max_model_len / block_size) * block_size
    per_token = layers * 2 * kv_heads * head_dim * DTYPE_BYTES[dtype]
    return max(sequences, 1) * tokens * per_token / GIB


def rollout_sequences(batch_size: int, n: int, replicas: int, prompts_per_pass: int | None = None) -> int:
    """Sequences one rollout replica generates at once: ``n`` samples of each prompt of its share of the
    ``batch_size`` prompts (a contiguous share per replica), at most ``prompts_per_pass`` prompts per pass.

    >>> rollout_sequences(4, 4, 1), rollout_sequences(5, 4, 2), rollout_sequences(16, 4, 1, prompts_per_pass=4)
    (16, 12, 16)
    """
    prompts = math.ceil(batch_size / max(replicas, 1))
    return max(1, min(prompts, prompts_per_pass or prompts) * n)
