"""Per-role process environment: thread counts and device selection, set before torch/JAX import.

Ray starts actor processes with ``OMP_NUM_THREADS=1`` unless told otherwise, which halves (or
worse) CPU throughput; each role instead gets the threads its config asks for. ``threads=0``
means every core of the node: the phases of a step run one after another, so roles that share a
node time-share its cores.
"""

from __future__ import annotations

import os
from typing import Any

from relay.models.prepare_smollm2 import relay_home


def resolve_threads(threads: int) -> int:
    return threads if threads > 0 else (os.cpu_count() or 1)


def role_env_vars(threads: int, accelerator: str = "cpu") -> dict[str, str]:
    """Environment for a role's process (passed as the actor's ``runtime_env``)."""
    count = resolve_threads(threads)
    n = str(count)
    env = {
        "OMP_NUM_THREADS": n,
        "MKL_NUM_THREADS": n,
        "OPENBLAS_NUM_THREADS": n,
        "TOKENIZERS_PARALLELISM": "false",
        # XLA executables persist across runs: a rerun of the same shapes skips compilation.
        "JAX_COMPILATION_CACHE_DIR": str(relay_home() / "jax-cache"),
    }
    if accelerator == "cpu":
        # vLLM-CPU binds its OpenMP threads; "auto" may reserve cores and use fewer than asked.
        env["VLLM_CPU_OMP_THREADS_BIND"] = f"0-{count - 1}"
        env["JAX_PLATFORMS"] = "cpu"
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def apply_torch_threads(threads: int) -> int:
    import torch

    n = resolve_threads(threads)
    torch.set_num_threads(n)
    return n


def runtime_env(threads: int, accelerator: str = "cpu", extra: dict[str, Any] | None = None) -> dict[str, Any]:
    env = {"env_vars": role_env_vars(threads, accelerator)}
    if extra:
        env.update(extra)
    return env


def peak_rss_gib() -> float:
    """This process's peak resident memory so far, in GiB (Linux reports ru_maxrss in KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
