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
def tiny_sharded_qwen2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tied tiny Qwen2 in the Qwen2.5 checkpoints' on-disk layout: bfloat16 weights in two safetensors shards
    named by ``model.safetensors.index.json``."""
    from relay.models.tiny import TINY_SHARD_SIZE, build_tiny_qwen2

    return build_tiny_qwen2(
        tmp_path_factory.mktemp("tiny-qwen2-sharded-bf16"), dtype="bfloat16", max_shard_size=TINY_SHARD_SIZE, seed=4
    )


@pytest.fixture(scope="session")
def tiny_qwen2_float32_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same tiny Qwen2 (same seed) as :func:`tiny_sharded_qwen2_dir`, saved float32 in one file."""
    from relay.models.tiny import build_tiny_qwen2

    return build_tiny_qwen2(tmp_path_factory.mktemp("tiny-qwen2-float32"), seed=4)


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
