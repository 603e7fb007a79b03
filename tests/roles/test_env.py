"""Per-role process environment: thread counts and vLLM-CPU core binding."""

from __future__ import annotations

import pytest

from roles.env import cpu_bind, role_env_vars


@pytest.mark.parametrize(
    ("first", "threads", "cores", "expected"),
    [
        (0, 2, 2, "0-1"),
        (0, 1, 2, "0-0"),
        (1, 1, 2, "1-1"),
        (2, 2, 8, "2-3"),
        (6, 4, 8, "6-7,0-1"),
        (7, 2, 8, "7,0"),
        (3, 3, 4, "3,0-1"),
        (0, 16, 8, "0-7"),  # more threads than cores: every core once
        (9, 2, 8, "1-2"),  # the start wraps too
    ],
)
def test_cpu_bind(first: int, threads: int, cores: int, expected: str) -> None:
    assert cpu_bind(first, threads, cores) == expected


def test_rollout_replicas_bind_to_different_cores() -> None:
    a = role_env_vars(1, "cpu", first_core=0)
    b = role_env_vars(1, "cpu", first_core=1)
    assert a["OMP_NUM_THREADS"] == b["OMP_NUM_THREADS"] == "1"
    assert a["VLLM_CPU_OMP_THREADS_BIND"] != b["VLLM_CPU_OMP_THREADS_BIND"]


def test_every_role_compiles_through_the_bounded_persistent_cache() -> None:
    from relay.repo import JAX_CACHE_MAX_BYTES, relay_home

    for env in (role_env_vars(1, "cpu"), role_env_vars(4, "gpu", jax_role=True)):
        assert env["JAX_COMPILATION_CACHE_DIR"] == str(relay_home() / "jax-cache")
        assert int(env["JAX_COMPILATION_CACHE_MAX_SIZE"]) == JAX_CACHE_MAX_BYTES > 0  # > 0: JAX's locked LRU cache


def test_gpu_roles_get_no_cpu_binding() -> None:
    env = role_env_vars(4, "gpu", jax_role=True)
    assert "VLLM_CPU_OMP_THREADS_BIND" not in env and env["JAX_PLATFORMS"] == "cuda"


def test_cpu_affinity_sets_the_env_and_pins_every_thread(monkeypatch) -> None:
    import contextlib
    import os
    import threading

    from roles.env import apply_cpu_affinity, role_env_vars

    env = role_env_vars(0, "cpu", cpu_affinity=[1])
    assert env["RELAY_CPU_AFFINITY"] == "1" and env["VLLM_CPU_OMP_THREADS_BIND"] == "1"
    assert env["OMP_NUM_THREADS"] == "1"  # one thread per pinned core unless threads is set
    assert "RELAY_CPU_AFFINITY" not in role_env_vars(0, "cpu")
    before = os.sched_getaffinity(0)
    monkeypatch.delenv("RELAY_CPU_AFFINITY", raising=False)
    assert apply_cpu_affinity() is None
    core = min(before)
    monkeypatch.setenv("RELAY_CPU_AFFINITY", str(core))
    seen: list[set[int]] = []
    try:
        assert apply_cpu_affinity() == [core]
        worker = threading.Thread(target=lambda: seen.append(os.sched_getaffinity(0)))
        worker.start()
        worker.join()
        assert os.sched_getaffinity(0) == {core} and seen == [{core}]
    finally:
        for tid in os.listdir("/proc/self/task"):
            with contextlib.suppress(ProcessLookupError):  # a thread that ended since the listing
                os.sched_setaffinity(int(tid), before)
