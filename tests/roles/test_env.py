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


def test_gpu_roles_get_no_cpu_binding() -> None:
    env = role_env_vars(4, "gpu", jax_role=True)
    assert "VLLM_CPU_OMP_THREADS_BIND" not in env and env["JAX_PLATFORMS"] == "cuda"
