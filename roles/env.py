"""Per-role process environment: thread counts and device selection, set before torch/JAX import.

Ray starts actor processes with ``OMP_NUM_THREADS=1`` unless told otherwise, which halves (or
worse) CPU throughput; each role instead gets the threads its config asks for. ``threads=0``
means every core of the node: the phases of a step run one after another, so roles that share a
node time-share its cores.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from relay.faults import FAULT_ENV
from relay.learner.xla_cpu import cpu_xla_flags
from relay.metrics import system as sm
from relay.repo import JAX_CACHE_MAX_BYTES, relay_home
from relay.run.logs import ROLE_LOG_ENV


def resolve_threads(threads: int) -> int:
    return threads if threads > 0 else (os.cpu_count() or 1)


def role_env_vars(
    threads: int,
    device: str = "cpu",
    jax_role: bool = False,
    local_devices: int = 1,
    visible_gpus: str | None = None,
    shares_gpus: bool = False,
    deterministic: bool = False,
    first_core: int = 0,
    cpu_affinity: list[int] | None = None,
    log_file: str | None = None,
) -> dict[str, str]:
    """Environment for a role's process (passed as the actor's ``runtime_env``).

    ``device`` is what the role computes on. Ray sets ``CUDA_VISIBLE_DEVICES`` (GPU) and
    ``TPU_VISIBLE_CHIPS`` (TPU) for the devices an actor reserves; ``visible_gpus`` overrides it for a
    colocated actor that runs on GPUs another role reserved. ``jax_role``: the learner, whose JAX
    platform follows ``device`` (on CPU with ``local_devices`` > 1 XLA fakes that many host devices).
    ``shares_gpus``: other roles' processes use the same GPUs (``placement.colocate``). ``first_core``: where
    vLLM-CPU binds its OpenMP threads (cores ``first_core .. first_core + threads - 1``, wrapping around the
    node's cores), so rollout replicas with a few threads each sit on different cores instead of all on 0.

    Example: 2 replicas with ``threads=1`` on a 2-core node get ``VLLM_CPU_OMP_THREADS_BIND`` ``0-0`` and ``1-1``.

    ``cpu_affinity`` (``<role>.resources.cpu_affinity``): the cores the process may run on
    (``RELAY_CPU_AFFINITY``, applied by :func:`apply_cpu_affinity` when the role starts); its threads default
    to one per core and vLLM-CPU binds to exactly those cores.

    ``log_file``: the file the process's output goes to (``RELAY_ROLE_LOG``, applied by
    :func:`relay.run.logs.apply_role_log` when the role starts); None leaves it to Ray.
    """
    if cpu_affinity:
        threads = threads or len(cpu_affinity)
    count = resolve_threads(threads)
    env = _thread_and_cache_env(count)
    env.update(_platform_env(device, jax_role, local_devices, count, first_core, cpu_affinity))
    if cpu_affinity:
        env["RELAY_CPU_AFFINITY"] = ",".join(map(str, cpu_affinity))
    if log_file:
        env[ROLE_LOG_ENV] = log_file
    if visible_gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible_gpus
    if deterministic:
        env.update(_deterministic_env(device, jax_role))
    if os.environ.get(FAULT_ENV):  # a fault-injection run arms its roles too, wherever Ray starts them
        env[FAULT_ENV] = os.environ[FAULT_ENV]
    if jax_role and device == "gpu" and shares_gpus:
        # Sharing GPUs with torch processes: JAX must not grab 75% of their memory up front.
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    return env


def _thread_and_cache_env(threads: int) -> dict[str, str]:
    """Every role's thread counts (``threads`` for OpenMP, MKL and OpenBLAS; none for tokenizers) and its
    persistent XLA compilation cache."""
    n = str(threads)
    return {
        "OMP_NUM_THREADS": n,
        "MKL_NUM_THREADS": n,
        "OPENBLAS_NUM_THREADS": n,
        "TOKENIZERS_PARALLELISM": "false",
        # XLA executables persist across runs: a rerun of the same shapes skips compilation (JAX caches compiles
        # over 1 s, every program of a real model). A size bound turns on JAX's LRU eviction and with it the file
        # lock around each read and write (jax/_src/lru_cache.py, JAX 0.10.2: without a bound, processes on one node,
        # a learner's hosts, write entries unlocked).
        "JAX_COMPILATION_CACHE_DIR": str(relay_home() / "jax-cache"),
        "JAX_COMPILATION_CACHE_MAX_SIZE": str(JAX_CACHE_MAX_BYTES),
    }


def _platform_env(
    device: str, jax_role: bool, local_devices: int, threads: int, first_core: int, cpu_affinity: list[int] | None
) -> dict[str, str]:
    """The device a role computes on: on CPU, vLLM-CPU's core binding (the ``cpu_affinity`` cores, else
    ``threads`` cores from ``first_core``), JAX on CPU with no GPU visible and, for the JAX role, XLA's
    ``local_devices`` host devices; on GPU or TPU, the JAX role's platform."""
    env: dict[str, str] = {}
    if device == "cpu":
        # vLLM-CPU binds its OpenMP threads; "auto" may reserve cores and use fewer than asked.
        env["VLLM_CPU_OMP_THREADS_BIND"] = (
            ",".join(map(str, cpu_affinity)) if cpu_affinity else cpu_bind(first_core, threads)
        )
        env["JAX_PLATFORMS"] = "cpu"
        env["CUDA_VISIBLE_DEVICES"] = ""
        if jax_role:
            env["XLA_FLAGS"] = cpu_xla_flags(local_devices)
    elif jax_role:
        env["JAX_PLATFORMS"] = {"gpu": "cuda", "tpu": "tpu"}[device]
    return env


def _deterministic_env(device: str, jax_role: bool) -> dict[str, str]:
    """What makes a role's kernels deterministic: torch's deterministic algorithms (through
    ``RELAY_DETERMINISTIC``) and, on GPU, cuBLAS's fixed workspace and, for the JAX role, XLA's deterministic ops."""
    env = {"RELAY_DETERMINISTIC": "1"}  # read by apply_torch_threads: torch deterministic algorithms
    if device == "gpu":
        env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
        if jax_role:
            env["XLA_FLAGS"] = "--xla_gpu_deterministic_ops=true"
    return env


def cpu_bind(first_core: int, threads: int, cores: int | None = None) -> str:
    """vLLM-CPU's core list for ``threads`` threads from ``first_core`` on a node of ``cores`` cores.

    >>> cpu_bind(0, 2, 2), cpu_bind(1, 1, 2), cpu_bind(3, 2, 4), cpu_bind(3, 3, 4)
    ('0-1', '1-1', '3,0', '3,0-1')
    """
    cores = cores or os.cpu_count() or 1
    threads = min(threads, cores)
    start = first_core % cores
    if start + threads <= cores:
        return f"{start}-{start + threads - 1}"
    wrapped = start + threads - cores
    head = f"{start}-{cores - 1}" if cores - 1 > start else f"{start}"
    return f"{head},0-{wrapped - 1}" if wrapped > 1 else f"{head},0"


def apply_cpu_affinity() -> list[int] | None:
    """Pin every thread of this process (and the threads and processes it starts later) to the cores in
    ``RELAY_CPU_AFFINITY`` (``<role>.resources.cpu_affinity``); returns them, or None when not pinned.
    Called first thing in each role's ``__init__``, before torch or XLA create their thread pools (XLA sizes
    its pool from the affinity mask)."""
    cores = os.environ.get("RELAY_CPU_AFFINITY")
    if not cores:
        return None
    mask = {int(c) for c in cores.split(",")}
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):  # a thread that just ended
            os.sched_setaffinity(int(tid), mask)
    return sorted(mask)


def apply_torch_threads(threads: int) -> int:
    """Set torch's thread count (and deterministic algorithms when the role runs with ``RELAY_DETERMINISTIC``)."""
    import torch

    n = resolve_threads(threads)
    torch.set_num_threads(n)
    if os.environ.get("RELAY_DETERMINISTIC") == "1":
        torch.use_deterministic_algorithms(True, warn_only=True)
    return n


def runtime_env(threads: int, device: str = "cpu", **env_kwargs: Any) -> dict[str, Any]:
    return {"env_vars": role_env_vars(threads, device, **env_kwargs)}


def peak_rss_gib() -> float:
    """This process's peak resident memory so far, in GiB (Linux reports ru_maxrss in KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def shared_rss_gib() -> float:
    """This process's resident shared-memory pages now (``RssShmem``), in GiB: on a Ray worker, the object
    store's pages it wrote or read (the weights it put or fetched). They count in its resident memory and in
    that of every other process that touched the same object, so a sum of roles' RSS counts them once per
    role; 0.0 where ``/proc`` does not say."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("RssShmem:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return 0.0


def memory_metrics(role: str) -> dict[str, float]:
    """``memory/<role>_peak_rss_gib`` (peak resident memory) and ``memory/<role>_shared_gib`` (its object-store
    pages now, see :func:`shared_rss_gib`)."""
    return {sm.MEMORY_PEAK_RSS.format(role=role): peak_rss_gib(), sm.MEMORY_SHARED.format(role=role): shared_rss_gib()}
