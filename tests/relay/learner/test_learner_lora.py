"""The JAX learner with LoRA (``model.lora``): only the adapters train, fresh adapters are the base model, the
merged export equals the adapted model, a checkpoint resumes exactly, and PEFT loads the exported adapter."""

import json

import jax
import numpy as np
import pytest

from benchmarks.harness.synthetic import adamw_section, synthetic_batch
from relay.learner.checkpointing import load_learner, save_learner
from relay.learner.grpo_loss import LossSettings
from relay.learner.learner import JaxLearner
from relay.learner.sharding import place_host_tree
from relay.models.hf_params import hf_to_params
from relay.models.layer_stack import stack_layers
from relay.models.lora import peft_config
from relay.models.lora_spec import LoraSpec
from tests.relay.learner.gradients import learner_gradients

P, R, B = 8, 8, 8
SPEC = LoraSpec(4, 8.0, ("q_proj", "v_proj", "o_proj", "down_proj"))


def _batch(seed: int = 0) -> dict[str, np.ndarray]:
    return synthetic_batch(B, P, R, vocab=49152, seed=seed)


def _learner(
    model_dir,
    lora: LoraSpec | None = SPEC,
    lr: float = 1e-2,
    kl: float = 0.0,
    ref_in_learner: bool = False,
    seed: int = 0,
) -> JaxLearner:
    loss = LossSettings(0.2, 0.2, kl, "low_var_kl", 1.0, old_from_batch=False, ref_in_learner=ref_in_learner)
    return JaxLearner(str(model_dir), adamw_section(lr, clip_norm=1e9), loss, 4, lora=lora, lora_seed=seed)


def _host(tree) -> list[np.ndarray]:
    return [np.array(x) for x in jax.tree_util.tree_leaves(tree)]


def test_the_update_changes_only_the_adapters(tiny_model_dir) -> None:
    learner = _learner(tiny_model_dir)
    base, adapters = _host(learner.params), _host(learner.adapters)
    # Optimizer state only for the adapters: AdamW's mu and nu are adapter-shaped.
    adapter_shapes = sorted(x.shape for x in adapters)
    assert sorted(x.shape for x in _host(learner.opt_state) if x.ndim) == sorted(adapter_shapes * 2)
    metrics = learner.update(_batch(), P)
    assert metrics["learner/skipped_steps"] == 0
    for before, after in zip(base, _host(learner.params), strict=True):
        np.testing.assert_array_equal(before, after)  # the base is frozen, bit for bit
    leaves = jax.tree_util.tree_leaves_with_path(learner.adapters)
    moved = {
        jax.tree_util.keystr(p): float(np.abs(np.asarray(x) - a).max())
        for (p, x), a in zip(leaves, adapters, strict=True)
    }
    # Step 1: B (zero) moves; A's gradient goes through B, so A moves from step 2 on.
    assert all(v > 1e-4 for k, v in moved.items() if "lora_B" in k) and all(
        v == 0 for k, v in moved.items() if "lora_A" in k
    )
    learner.update(_batch(1), P)
    after = _host(learner.adapters)
    assert all(float(np.abs(x - a).max()) > 1e-4 for x, a in zip(after, adapters, strict=True))


def test_fresh_adapters_give_the_base_models_log_probs_and_gradients_only_for_adapters(tiny_model_dir) -> None:
    batch = _batch(1)
    grads, lora_metrics, lora_lp = learner_gradients(_learner(tiny_model_dir), batch, P)
    _, full_metrics, full_lp = learner_gradients(_learner(tiny_model_dir, lora=None), batch, P)
    np.testing.assert_array_equal(lora_lp, full_lp)  # B = 0: the adapted model is the base model
    assert lora_metrics["loss"] == pytest.approx(full_metrics["loss"], abs=1e-7)
    layers = grads["model"]["layers"]
    assert sorted(f"{p}.{m}" for p in layers for m in layers[p]) == sorted(
        f"{'self_attn' if m.endswith(('q_proj', 'v_proj', 'o_proj')) else 'mlp'}.{m}" for m in SPEC.target_modules
    )
    # With B = 0 the gradient reaches B (x A^T is non-zero) and not A (its gradient goes through B).
    q = layers["self_attn"]["q_proj"]
    assert float(np.abs(np.asarray(q["lora_B"])).max()) > 0 and float(np.abs(np.asarray(q["lora_A"])).max()) == 0


def test_the_learners_own_reference_is_the_base_model_with_the_adapters_off(tiny_model_dir) -> None:
    """The reference in the learner with LoRA: the KL loss against a base forward inside the step equals the KL
    loss against the base model's log-probs handed in as ``ref_log_probs`` (what the actor_ref role would send)."""
    base = _learner(tiny_model_dir, lora=None)

    def with_base_reference(seed: int) -> dict[str, np.ndarray]:
        batch = _batch(seed)
        batch["ref_log_probs"] = learner_gradients(base, batch, P)[2]
        return batch

    own = _learner(tiny_model_dir, kl=0.5, ref_in_learner=True)
    fed = _learner(tiny_model_dir, kl=0.5)
    wrong_reference = _batch(0)  # its ref_log_probs are a constant, not the base's: the learner's own ignores it
    assert own.update(wrong_reference, P)["learner/ref_forward"] == 1.0
    assert fed.update(with_base_reference(0), P)["learner/ref_forward"] == 0.0
    batch = with_base_reference(1)
    own_grads, own_metrics, own_lp = learner_gradients(
        own, {**batch, "ref_log_probs": batch["ref_log_probs"] * 0 - 9}, P
    )
    fed_grads, fed_metrics, fed_lp = learner_gradients(fed, batch, P)
    np.testing.assert_allclose(own_lp, fed_lp, atol=1e-6)
    assert own_metrics["kl"] > 1e-4  # the adapters moved the policy away from the base
    assert own_metrics["kl"] == pytest.approx(fed_metrics["kl"], rel=1e-4, abs=1e-8)
    assert own_metrics["loss"] == pytest.approx(fed_metrics["loss"], rel=1e-4, abs=1e-8)
    for a, b in zip(_host(own_grads), _host(fed_grads), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7)


def test_adapter_dropout_changes_the_update_repeatably(tiny_model_dir) -> None:
    """``model.lora.dropout``: the update forward drops the adapters' inputs out (other updates than without it),
    the same seed and step counters draw the same masks (two runs agree bit for bit), and the log-probs the learner
    reports for fresh adapters (B = 0) are still the base model's: dropout only touches the adapter path."""
    dropped = LoraSpec(SPEC.rank, SPEC.alpha, SPEC.target_modules, dropout=0.3)
    runs = [_learner(tiny_model_dir, lora=dropped) for _ in range(2)]
    plain = _learner(tiny_model_dir)
    _, _, fresh_lp = learner_gradients(runs[0], _batch(1), P)
    np.testing.assert_array_equal(fresh_lp, learner_gradients(plain, _batch(1), P)[2])
    # One update moves B only (A's gradient goes through B = 0), but B's gradient is x_dropped A^T: the masks show.
    for learner in (*runs, plain):
        learner.update(_batch(0), P)
    for a, b in zip(_host(runs[0].adapters), _host(runs[1].adapters), strict=True):
        np.testing.assert_array_equal(a, b)
    pairs = zip(_host(runs[0].adapters), _host(plain.adapters), strict=True)
    differences = [float(np.abs(a - b).max()) for a, b in pairs]
    assert max(differences) > 1e-4


def test_merged_export_is_the_adapted_model(tiny_model_dir) -> None:
    learner = _learner(tiny_model_dir)
    before = learner.export_hf()
    learner.update(_batch(), P)
    after = learner.export_hf()
    changed = sorted({k.split(".")[-2] for k in before if not np.array_equal(before[k], after[k])})
    assert changed == sorted(SPEC.target_modules)  # the merge touches the adapted weights only
    # The merged weights give the adapted model's log-probs: a full-fine-tuning learner loaded with them agrees.
    batch = _batch(2)
    _, _, lora_lp = learner_gradients(learner, batch, P)
    merged = _learner(tiny_model_dir, lora=None)
    params = stack_layers(hf_to_params(after, merged.config), merged.config.num_hidden_layers)
    merged.params = place_host_tree(params, merged.param_sharding)
    _, _, merged_lp = learner_gradients(merged, batch, P)
    np.testing.assert_allclose(lora_lp, merged_lp, atol=1e-5)


def test_a_checkpoint_resumes_the_adapters_and_their_optimizer_exactly(tiny_model_dir, tmp_path) -> None:
    run = _learner(tiny_model_dir)
    run.update(_batch(0), P)
    save_learner(run, tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "adapters.safetensors").exists() and not (tmp_path / "ckpt" / "policy.json").exists()
    resumed = _learner(tiny_model_dir)
    load_learner(resumed, tmp_path / "ckpt")
    run.update(_batch(3), P)
    resumed.update(_batch(3), P)
    for a, b in zip(_host(run.adapters), _host(resumed.adapters), strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="holds LoRA adapters: set the run's model.lora"):
        load_learner(_learner(tiny_model_dir, lora=None), tmp_path / "ckpt")


def test_peft_loads_the_exported_adapter_and_gives_the_same_log_probs(tiny_model_dir, tmp_path) -> None:
    import peft
    import torch
    from safetensors.numpy import load_file
    from transformers import AutoModelForCausalLM

    from benchmarks.speed.padded_log_probs import padded_response_log_probs
    from relay.checkpoint.peft_export import export_peft_adapter, merge_adapter_dir

    learner = _learner(tiny_model_dir)
    learner.update(_batch(0), P)
    out = export_peft_adapter(tmp_path / "adapter", learner.export_adapters(), peft_config(SPEC, str(tiny_model_dir)))
    assert json.loads((out / "adapter_config.json").read_text())["target_modules"] == sorted(SPEC.target_modules)
    # driver.evaluate's view of the adapter: the base with it merged, = the learner's merged export.
    merged = load_file(str(merge_adapter_dir(out) / "model.safetensors"))
    for name, weight in learner.export_hf().items():
        np.testing.assert_allclose(merged[name], weight, atol=1e-6)
    base = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32)
    model = peft.PeftModel.from_pretrained(base, str(out)).eval().get_base_model()  # LoRA layers injected
    batch = _batch(4)
    _, _, jax_lp = learner_gradients(learner, batch, P)
    ids, mask, pos = batch["input_ids"], batch["attention_mask"], batch["position_ids"]
    torch_lp = padded_response_log_probs(model, ids, mask, pos, P)
    response = batch["response_mask"] > 0
    assert np.abs(torch_lp - jax_lp)[response].max() < 1e-4
    plain = padded_response_log_probs(
        AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32), ids, mask, pos, P
    )
    assert np.abs(plain - jax_lp)[response].max() > 1e-3  # the adapter is really applied
