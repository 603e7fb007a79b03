"""The KV cache one rollout step needs (``rollout.kv_cache_gib: auto``).

vLLM allocates its KV cache up front, in blocks of ``block_size`` token slots per layer (128 on the CPU backend,
16 on GPUs). A step generates the ``n`` samples of each of its prompts at once; each sample can grow to the
longest prompt plus ``max_response_length`` tokens. With prefix caching (on in :mod:`relay.engines.vllm_engine`)
the ``n`` samples of a prompt share its full blocks, which vLLM caches as soon as it allocates them, so the other
samples scheduled in the same step find them; each sample holds its own copy of the prompt's last, partial block
and its response's blocks. The budget is the most blocks a group can hold at once, over every prompt length up to
the longest, times the prompts of a pass: the step never waits for a block and vLLM never preempts a sequence.

Worked example, SmolLM2-135M (30 layers, 3 KV heads of 64) in float32, the default job's 4 prompts x 4 samples of
at most 256 + 256 tokens on the CPU (blocks of 128): a group holds at most 13 blocks (a 255-token prompt: 1 shared
block, then 3 per sample for its 127-token tail and 256-token response), 52 blocks in all = 0.29 GiB, where every
sample at 512 tokens would be 64 blocks = 0.35 GiB.
"""

from __future__ import annotations

import math

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
CPU_BLOCK_SIZE = 128  # vLLM's CPU attention backend (vllm/platforms/cpu.py)
GPU_BLOCK_SIZE = 16
GIB = 2**30


def group_kv_blocks(max_prompt: int, max_response: int, n: int, block_size: int) -> int:
    """The most KV blocks one prompt's ``n`` samples hold at once with prefix caching: over prompt lengths
    ``p <= max_prompt``, ``s = (p - 1) // block_size`` shared full blocks (vLLM recomputes a prompt's last token, so
    a prompt that fills its last block does not share that block) plus, per sample, ``ceil((p - s * block_size +
    max_response) / block_size)`` for the rest of its prompt and its response.

    >>> group_kv_blocks(256, 256, 4, 128), group_kv_blocks(256, 128, 4, 128), group_kv_blocks(256, 256, 1, 128)
    (13, 9, 4)
    >>> group_kv_blocks(512, 256, 8, 16)  # GPU blocks of 16, a 511-token prompt: 31 shared + 8 x 17; not 8 x 48
    167
    """
    block, n = max(block_size, 1), max(n, 1)
    lengths = range(max(1, max_prompt - block + 1), max_prompt + 1)  # every remainder once, the largest shared
    return max((p - 1) // block + n * math.ceil((p - (p - 1) // block * block + max_response) / block) for p in lengths)


def step_kv_cache_gib(
    layers: int,
    kv_heads: int,
    head_dim: int,
    dtype: str,
    prompts: int,
    n: int,
    max_prompt: int,
    max_response: int,
    block_size: int = CPU_BLOCK_SIZE,
) -> float:
    """GiB of KV cache for ``prompts`` groups of ``n`` samples at once (:func:`group_kv_blocks`); a token takes
    ``layers x 2 (K and V) x kv_heads x head_dim`` values of ``dtype``.

    SmolLM2-135M (30 layers, 3 KV heads of 64): the default job's 4 prompts x 4 samples of 256 + 256 tokens, and
    the step benchmark's 8 x 4 of 256 + 128:

    >>> default_job, benchmark = (30, 3, 64, "float32", 4, 4, 256, 256), (30, 3, 64, "float32", 8, 4, 256, 128)
    >>> round(step_kv_cache_gib(*default_job), 4), round(step_kv_cache_gib(*benchmark), 4)
    (0.2856, 0.3955)
    """
    blocks = max(prompts, 1) * group_kv_blocks(max_prompt, max_response, n, block_size)
    per_token = layers * 2 * kv_heads * head_dim * DTYPE_BYTES[dtype]
    return blocks * block_size * per_token / GIB


def rollout_prompts(batch_size: int, replicas: int, prompts_per_pass: int | None = None) -> int:
    """Prompts one rollout replica samples at once: its share of the ``batch_size`` prompts (a contiguous share
    per replica), at most ``prompts_per_pass`` per pass.

    >>> rollout_prompts(4, 1), rollout_prompts(5, 2), rollout_prompts(16, 1, prompts_per_pass=4)
    (4, 3, 4)
    """
    prompts = math.ceil(batch_size / max(replicas, 1))
    return max(1, min(prompts, prompts_per_pass or prompts))
