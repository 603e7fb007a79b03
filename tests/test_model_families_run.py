"""Each model family beyond the tiny Llama trains end to end: two steps of the tiny preset on a tiny random Qwen3 and
Llama 3 (RoPE scaling), vLLM sampling at the learner's log-probs before and after a weight sync, and the exported
checkpoint loading in transformers as the family's own class with the learner's weights."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from relay.checkpoint import checkpoint_path
from relay.models.tiny import build_tiny_llama3, build_tiny_qwen3
from tests.tiny_runs import metric_rows, run_config
from trainer import train

STEPS = 2
FAMILIES: dict[str, tuple[Callable[..., Path], str]] = {
    "qwen3": (build_tiny_qwen3, "Qwen3ForCausalLM"),
    "llama3": (build_tiny_llama3, "LlamaForCausalLM"),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_two_steps_train_and_export(family: str, ray_session, tmp_path: Path) -> None:
    builder, architecture = FAMILIES[family]
    model_dir = builder(tmp_path / "model")
    overrides = [
        "data.max_response_length=16",
        f"trainer.output_dir={tmp_path}",
        f"trainer.run_name={family}",
        f"trainer.save_freq={STEPS}",
        "trainer.export_hf=true",
    ]
    run_dir = tmp_path / family
    assert train(run_config(model_dir, STEPS, overrides), model_dir, run_dir) == 0
    rows = metric_rows(run_dir)
    assert sorted(rows) == list(range(STEPS))
    for row in rows.values():
        # step 0 samples with the checkpoint, step 1 with the weights step 0's update synced
        assert row["logprob_gap/rollout_vs_learner_max"] < 1e-3, row["logprob_gap/rollout_vs_learner_max"]
        assert row["actor/optimizer_steps"] >= 1 and np.isfinite(row["actor/loss"])

    from safetensors.numpy import load_file
    from transformers import AutoModelForCausalLM

    last = checkpoint_path(run_dir, STEPS)
    assert json.loads((last / "hf" / "config.json").read_text())["architectures"] == [architecture]
    model = AutoModelForCausalLM.from_pretrained(last / "hf")
    policy = load_file(str(last / "learner" / "policy.safetensors"))
    q_norm = model.model.layers[0].self_attn.q_norm.weight if family == "qwen3" else None
    if q_norm is not None:  # the learner trained the q norm and the export carries it
        assert (q_norm.detach().numpy() == policy["['model.layers.0.self_attn.q_norm.weight']"]).all()
    embed = model.get_input_embeddings().weight.detach().numpy()
    assert (embed == policy["['model.embed_tokens.weight']"]).all()
