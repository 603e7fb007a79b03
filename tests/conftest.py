"""Session fixtures: one tiny model checkpoint and one local Ray instance for the whole run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from relay.repo import REPO_ROOT


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, hidden-64 random Llama (tied embeddings) with the SmolLM2 tokenizer."""
    from relay.models.tiny import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def tiny_untied_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from relay.models.tiny import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama-untied"), tie_word_embeddings=False, seed=1)


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray with this machine's real CPU count, shared by every test that needs Ray."""
    import ray

    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    ray.init(
        num_cpus=os.cpu_count(),
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO_ROOT)}},
    )
    yield ray
    ray.shutdown()
