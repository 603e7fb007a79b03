"""The XLA flags of a learner on the CPU (the learner role's environment, and the learner benchmarks')."""

from __future__ import annotations

# XLA-CPU's default scheduler orders a program for concurrency, which runs rematerialised (jax.checkpoint)
# forward passes right after the first forward and keeps every layer's activations alive anyway: measured on
# SmolLM2 shapes (4 rows x 512 tokens), 150 MiB/layer with it, 18 MiB/layer without it (BENCHMARKS.md, "Learner
# memory").
MEMORY_SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=false"


def cpu_xla_flags(local_devices: int = 1) -> str:
    """``XLA_FLAGS`` of a CPU learner: the memory-aware scheduler, and ``local_devices`` fake host devices.

    >>> cpu_xla_flags(2)
    '--xla_cpu_enable_concurrency_optimized_scheduler=false --xla_force_host_platform_device_count=2'
    """
    flags = [MEMORY_SCHEDULER_FLAG]
    if local_devices > 1:
        flags.append(f"--xla_force_host_platform_device_count={local_devices}")
    return " ".join(flags)
