"""A local Ray for the benchmarks that run Relay's trainer in their own process: started once and shut down by
whoever started it, or an already connected one (a test session's) used as is."""

from __future__ import annotations

import os

from relay.repo import REPO_ROOT

_STARTED_RAY: list[bool] = []


def ensure_ray() -> None:
    """A local Ray for the Relay scenarios (an already connected one, e.g. a test session's, is used as is)."""
    import ray

    if not ray.is_initialized():
        ray.init(
            num_cpus=os.cpu_count(),
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": str(REPO_ROOT)}},
        )
        _STARTED_RAY.append(True)


def shutdown_ray() -> None:
    """Shut down the Ray that :func:`ensure_ray` started (one it found connected is left running)."""
    import ray

    if _STARTED_RAY and ray.is_initialized():
        ray.shutdown()
        _STARTED_RAY.clear()
