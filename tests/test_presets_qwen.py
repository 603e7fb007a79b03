"""The Qwen2.5 presets on a tied tiny Qwen2 saved as Qwen2.5 ships (bfloat16, two safetensors shards and an index),
as ``tests/test_presets.py`` runs the SmolLM2 ones; the 4-GPU preset's export is then served by vLLM."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.presets import QWEN_PRESETS, check_preset_run, preset_params

# The 4-GPU preset's run is also read by the vLLM test (one module: one test worker, the run made once).
QWEN_4GPU = "gsm8k_qwen25_3b_4gpu.yaml"


@pytest.mark.parametrize("preset", preset_params(QWEN_PRESETS))
def test_the_preset_runs_two_steps_on_the_cpu(preset: str, preset_run) -> None:
    check_preset_run(*preset_run(preset))


def test_a_qwen_presets_export_loads_in_vllm(preset_run) -> None:
    """The 4-GPU preset's HF export (of a sharded bf16 tied Qwen2: the preset run's final checkpoint) is served by
    vLLM, with log-probs equal to transformers' on the same tokens."""
    _, _, run_dir = preset_run(QWEN_4GPU)
    assert _vllm_vs_transformers_gap(run_dir / "checkpoints" / "step_000002" / "hf") < 1e-3


def _vllm_vs_transformers_gap(model_dir: Path) -> float:
    """The largest |vLLM - transformers| log-prob over 8 sampled tokens of one prompt."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from relay.engines.base import SamplingSettings
    from relay.engines.vllm_engine import VLLMRolloutEngine

    eos = AutoTokenizer.from_pretrained(str(model_dir)).eos_token_id
    engine = VLLMRolloutEngine(str(model_dir), [eos], max_model_len=256, gpu_memory_utilization=0.3, kv_cache_gib=0.05)
    prompt = [1, 2, 3, 4]
    (sample,) = engine.generate([prompt], SamplingSettings(n=1, max_new_tokens=8, seed=0))[0]
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    with torch.no_grad():
        logits = model(torch.tensor([prompt + sample.token_ids])).logits[0, len(prompt) - 1 : -1].float()
    tokens = torch.tensor(sample.token_ids)[:, None]
    reference = torch.log_softmax(logits, -1).gather(-1, tokens)[:, 0].numpy()
    return float(np.abs(reference - np.asarray(sample.log_probs)).max())
