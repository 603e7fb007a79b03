"""A LoRA sync: the adapter payload, its merge into the frozen base, and the transformers engine sampling with
the merged weights at the JAX LoRA learner's log-probs."""

import numpy as np
import pytest
from transformers import AutoTokenizer

from benchmarks.harness.synthetic import adamw_section, synthetic_batch
from relay.engines.base import SamplingSettings
from relay.engines.hf_engine import HFRolloutEngine
from relay.engines.lora_payload import (
    SCALING_KEY,
    BaseMerger,
    adapter_payload,
    is_adapter_payload,
    payload_peft_config,
    peft_tensors,
)
from relay.learner.grpo_loss import LossSettings
from relay.learner.learner import JaxLearner
from relay.models.lora_spec import LoraSpec
from relay.rollout_batch import assemble_rollout
from tests.relay.learner.gradients import learner_gradients

Q = "base_model.model.model.layers.0.self_attn.q_proj"


def test_payload_config_golden() -> None:
    """rank from lora_A's rows (4), alpha = scaling x rank = 2 x 4 = 8, targets from the names."""
    payload = adapter_payload(
        {f"{Q}.lora_A.weight": np.zeros((4, 64)), f"{Q}.lora_B.weight": np.zeros((64, 4))}, scaling=2.0
    )
    assert is_adapter_payload(payload) and not is_adapter_payload(peft_tensors(payload))
    assert payload[SCALING_KEY].dtype == np.float32
    config = payload_peft_config(payload, "/base")
    assert (config["r"], config["lora_alpha"], config["target_modules"]) == (4, 8.0, ["q_proj"])
    assert config["base_model_name_or_path"] == "/base"


def test_merge_adds_scaled_b_a_to_the_adapted_weights_only(tiny_model_dir) -> None:
    merger = BaseMerger(tiny_model_dir)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 64)).astype(np.float32), rng.standard_normal((64, 2)).astype(np.float32)
    merged = merger.merged(adapter_payload({f"{Q}.lora_A.weight": a, f"{Q}.lora_B.weight": b}, 0.5))
    name = "model.layers.0.self_attn.q_proj.weight"
    np.testing.assert_allclose(merged[name], merger.base(name) + 0.5 * b @ a, atol=1e-6)
    others = [k for k in merger.names() if k != name]
    assert others and all(np.array_equal(merged[k], merger.base(k)) for k in others)
    with pytest.raises(ValueError, match="the adapter names 'model.layers.7.self_attn.q_proj'"):
        merger.merged(
            adapter_payload(
                {f"{Q}.lora_A.weight": a, f"{Q}.lora_B.weight": b}
                | {
                    Q.replace("layers.0", "layers.7") + ".lora_A.weight": a,
                    Q.replace("layers.0", "layers.7") + ".lora_B.weight": b,
                },
                0.5,
            )
        )


def test_the_transformers_engine_samples_at_the_lora_learners_log_probs_over_synced_steps(tiny_model_dir) -> None:
    """Three update -> adapter sync -> sample rounds on one engine: each sync merges into the base, not into the
    previous round's merged weights (merging twice would drift), so the engine keeps scoring like the learner."""
    spec = LoraSpec(4, 8.0, ("q_proj", "v_proj", "up_proj", "down_proj"))
    loss = LossSettings(0.2, 0.2, 0.0, "low_var_kl", 1.0, old_from_batch=False)
    learner = JaxLearner(str(tiny_model_dir), adamw_section(1e-2, clip_norm=1e9), loss, 4, lora=spec)
    learner.update(synthetic_batch(8, 8, 8, vocab=49152, seed=0), 8)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    engine = HFRolloutEngine(str(tiny_model_dir), eos_token_ids=[tok.eos_token_id], pad_token_id=tok.pad_token_id)
    merger = BaseMerger(tiny_model_dir)
    prompts = [[1, 100, 200, 300], [1, 400, 500, 600]]
    rng = np.random.default_rng(0)
    gaps = []
    for round_ in range(3):
        engine.load_weights(merger.merged(adapter_payload(learner.export_adapters(), spec.scaling)))
        gens = engine.generate(prompts, SamplingSettings(n=2, max_new_tokens=8, temperature=1.0, seed=round_))
        arrays = assemble_rollout(prompts, gens, engine.pad_token_id, bucket=8)
        batch = {k: arrays[k] for k in ("input_ids", "attention_mask", "position_ids", "response_mask")}
        mask = arrays["response_mask"].astype(bool)
        batch["advantages"] = (rng.standard_normal((4, 1)) * arrays["response_mask"]).astype(np.float32)
        _, _, learner_lp = learner_gradients(learner, batch, arrays["prompts"].shape[1])
        gaps.append(float(np.abs(learner_lp - arrays["rollout_log_probs"])[mask].max()))
        learner.update(batch, arrays["prompts"].shape[1])  # the next round samples from the moved adapters
    assert max(gaps) < 1e-4, gaps


def test_stale_lora_dirs_of_dead_processes_are_removed(tmp_path) -> None:
    import os

    from relay.engines.vllm_engine import remove_stale_lora_dirs

    alive = tmp_path / f"relay-lora-{os.getpid()}-abc"
    dead = tmp_path / "relay-lora-999999999-xyz"
    old_style = tmp_path / "relay-lora-qwerty"  # no pid: left alone
    for d in (alive, dead, old_style):
        d.mkdir()
    assert remove_stale_lora_dirs(tmp_path) == [dead]
    assert alive.exists() and old_style.exists() and not dead.exists()


def test_the_base_of_a_sharded_bfloat16_checkpoint_merges_as_float32(tiny_sharded_qwen2_dir) -> None:
    """The presets' layout (bfloat16 shards + index): the merger reads the shards the index names, widened to the
    float32 the learner reads, and its merged weights load into the transformers engine."""
    from relay.models.hf_params import load_hf_checkpoint, params_to_hf
    from relay.models.llama_config import LlamaConfig

    model_dir = tiny_sharded_qwen2_dir
    merger = BaseMerger(model_dir)
    learner_view = params_to_hf(load_hf_checkpoint(model_dir, LlamaConfig.from_pretrained(model_dir)))
    assert sorted(merger.names()) == sorted(learner_view)
    for name, value in learner_view.items():
        assert merger.base(name).dtype == np.float32, name
        np.testing.assert_array_equal(merger.base(name), value, err_msg=name)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 64)).astype(np.float32), rng.standard_normal((64, 2)).astype(np.float32)
    merged = merger.merged(adapter_payload({f"{Q}.lora_A.weight": a, f"{Q}.lora_B.weight": b}, 0.5))
    tok = AutoTokenizer.from_pretrained(model_dir)
    engine = HFRolloutEngine(str(model_dir), eos_token_ids=[tok.eos_token_id], pad_token_id=tok.pad_token_id)
    assert engine.load_weights(merged) == sum(v.nbytes for v in merged.values())
