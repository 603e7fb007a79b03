"""The JAX learner on the presets' checkpoint layout (tied Qwen2, bfloat16 weights in shards + index): float32 masters,
the actor_ref's torch model's log-probs, and an HF export that transformers reloads."""

from __future__ import annotations

import jax
import numpy as np
import torch
from safetensors import safe_open
from transformers import AutoModelForCausalLM

from benchmarks.harness.synthetic import adamw_section, synthetic_batch
from relay.checkpoint import export_hf_checkpoint
from relay.engines.torch_logprobs import response_log_probs
from relay.learner.grpo_loss import LossSettings
from relay.learner.learner import JaxLearner
from relay.models.checkpoint_files import check_checkpoint
from tests.relay.learner.gradients import learner_gradients

P, R, B = 8, 8, 8
LOG_PROB_ATOL = 1e-4  # float32 both sides, as tests/relay/models/test_logprob_agreement.py


def _learner(model_dir) -> JaxLearner:
    loss = LossSettings(0.2, 0.2, 0.0, "low_var_kl", 1.0, old_from_batch=False)
    return JaxLearner(str(model_dir), adamw_section(1e-3), loss, 4)


def _actor_ref_model(model_dir) -> torch.nn.Module:
    """The torch model as roles/actor_ref.py loads it: float32, sdpa."""
    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa").eval()


def test_learner_log_probs_match_the_torch_model_on_the_sharded_checkpoint(tiny_sharded_qwen2_dir) -> None:
    learner = _learner(tiny_sharded_qwen2_dir)
    assert {leaf.dtype for leaf in jax.tree_util.tree_leaves(learner.params)} == {np.dtype(np.float32)}
    batch = synthetic_batch(B, P, R, vocab=49152)
    _, _, got = learner_gradients(learner, batch, P)
    want = response_log_probs(
        _actor_ref_model(tiny_sharded_qwen2_dir), batch["input_ids"], batch["attention_mask"], batch["position_ids"], P
    )
    mask = batch["response_mask"].astype(bool)
    gap = np.abs(got - want)[mask]
    print(f"sharded bf16: |learner - torch| log-probs max {gap.max():.2g}")
    assert gap.max() < LOG_PROB_ATOL
    assert np.all(want[mask] < -5)  # real log-probs of a near-uniform random model, not zeros


def test_export_of_a_learner_loaded_from_shards_reloads_in_transformers(tiny_sharded_qwen2_dir, tmp_path) -> None:
    """The export is one float32 ``model.safetensors`` (no index, no base shards copied); transformers reloads it to
    the learner's weights, and it is the base model widened to float32 (no update ran)."""
    exported = _learner(tiny_sharded_qwen2_dir).export_hf()
    out = export_hf_checkpoint(tmp_path / "hf", exported, tiny_sharded_qwen2_dir)
    assert sorted(p.name for p in out.glob("*.safetensors*")) == ["model.safetensors"]
    with safe_open(str(out / "model.safetensors"), framework="pt") as f:
        assert {f.get_slice(name).get_dtype() for name in f.keys()} == {"F32"}  # noqa: SIM118
    check_checkpoint(out)
    reloaded = _actor_ref_model(out).state_dict()
    base = _actor_ref_model(tiny_sharded_qwen2_dir).state_dict()
    assert reloaded.keys() == base.keys() and exported.keys() == base.keys() - {"lm_head.weight"}
    for name, value in exported.items():
        np.testing.assert_array_equal(reloaded[name].numpy(), value, err_msg=name)
        np.testing.assert_array_equal(base[name].numpy(), value, err_msg=name)
