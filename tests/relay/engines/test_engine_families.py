"""Qwen3 and Llama 3 (RoPE scaling) in both rollout engines: samples' log-probs equal transformers' rescoring of
the same tokens, and a weight sync (Qwen3's q/k norms included) moves the engine to the new weights."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from transformers import AutoTokenizer

from relay.engines.base import SamplingSettings
from relay.models.hf_params import load_hf_checkpoint, params_to_hf
from relay.models.llama_config import LlamaConfig
from relay.models.tiny import build_tiny_llama3, build_tiny_qwen3
from relay.rollout_batch import assemble_rollout
from tests.relay.engines.rescoring import rescored_gap

# Prompts long enough (40 tokens + 12 sampled) to reach positions where the tiny Llama 3's scaled RoPE frequencies
# (pre-training context 64) differ from plain RoPE's.
PROMPTS = [[1, *range(100, 139)], [1, *range(400, 430)]]
SAMPLING = SamplingSettings(n=2, max_new_tokens=12, temperature=0.8, seed=0)
FAMILIES: dict[str, Callable[..., Path]] = {"qwen3": build_tiny_qwen3, "llama3": build_tiny_llama3}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family_model(request, tmp_path_factory) -> Path:
    return FAMILIES[request.param](tmp_path_factory.mktemp(request.param))


def _gap(model_dir: Path, arrays: dict, weights: dict | None = None) -> np.ndarray:
    return rescored_gap(model_dir, arrays, SAMPLING.temperature, weights)


def _perturbed(model_dir: Path) -> dict[str, np.ndarray]:
    weights = params_to_hf(load_hf_checkpoint(model_dir, LlamaConfig.from_pretrained(model_dir)))
    rng = np.random.default_rng(0)
    return {k: v + rng.normal(0, 0.05, v.shape).astype(np.float32) for k, v in weights.items()}


def _check_engine(engine, model_dir: Path) -> None:
    pad = AutoTokenizer.from_pretrained(model_dir).pad_token_id
    arrays = assemble_rollout(PROMPTS, engine.generate(PROMPTS, SAMPLING), pad_token_id=pad, bucket=8)
    gap = _gap(model_dir, arrays)
    assert gap.max() < 1e-3, gap.max()
    perturbed = _perturbed(model_dir)
    engine.load_weights(perturbed)
    arrays = assemble_rollout(PROMPTS, engine.generate(PROMPTS, SAMPLING), pad_token_id=pad, bucket=8)
    assert _gap(model_dir, arrays, perturbed).max() < 1e-3
    assert _gap(model_dir, arrays).mean() > 0.05  # the sync changed what the engine samples with


def test_vllm_engine(family_model: Path) -> None:
    from relay.engines.vllm_engine import VLLMRolloutEngine

    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{(os.cpu_count() or 1) - 1}")
    eos = AutoTokenizer.from_pretrained(family_model).eos_token_id
    engine = VLLMRolloutEngine(
        str(family_model), [eos], max_model_len=128, gpu_memory_utilization=0.3, kv_cache_gib=0.05
    )
    _check_engine(engine, family_model)


def test_hf_engine(family_model: Path) -> None:
    from relay.engines.hf_engine import HFRolloutEngine

    tok = AutoTokenizer.from_pretrained(family_model)
    _check_engine(
        HFRolloutEngine(str(family_model), eos_token_ids=[tok.eos_token_id], pad_token_id=tok.pad_token_id),
        family_model,
    )
