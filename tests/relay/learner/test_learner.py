"""The JAX learner: micro-batching does not change the update, and the update follows the advantage."""

from dataclasses import asdict, replace

import jax
import numpy as np
import pytest

from benchmarks.harness.synthetic import adamw_section, synthetic_batch
from relay.config.algorithm_schema import AlgorithmConfig
from relay.learner.grpo_loss import LossSettings
from relay.learner.learner import JaxLearner
from relay.models.jax_logprobs import response_log_probs
from tests.relay.learner.gradients import learner_gradients

P, R, B = 8, 8, 8


def _batch(seed: int = 0) -> dict[str, np.ndarray]:
    """Left-padded prompts, short responses, rollout/ref log-probs at the random model's ~log(1/49152)."""
    return synthetic_batch(B, P, R, vocab=49152, seed=seed)


def _learner(
    model_dir, micro: int, lr: float = 1e-3, kl_coef: float = 0.0, is_cap: float | None = None, **kw
) -> JaxLearner:
    loss = LossSettings(0.2, 0.2, kl_coef, "low_var_kl", 1.0, old_from_batch=False, rollout_is_cap=is_cap)
    optimizer = adamw_section(lr, clip_norm=1e9)
    return JaxLearner(str(model_dir), optimizer, loss, micro, **kw)


def test_micro_batch_size_does_not_change_the_gradients(tiny_model_dir) -> None:
    batch = _batch()
    whole, micro = _learner(tiny_model_dir, 8), _learner(tiny_model_dir, 1)
    g_whole, m_whole, lp_whole = learner_gradients(whole, batch, P)
    g_micro, m_micro, lp_micro = learner_gradients(micro, batch, P)
    assert m_whole["loss"] == pytest.approx(m_micro["loss"], abs=1e-6)
    np.testing.assert_allclose(lp_whole, lp_micro, atol=1e-5)
    for a, b in zip(jax.tree_util.tree_leaves(g_whole), jax.tree_util.tree_leaves(g_micro), strict=True):
        scale = float(np.abs(np.asarray(a)).max()) + 1e-12
        assert float(np.abs(np.asarray(a) - np.asarray(b)).max()) <= 1e-4 * scale + 1e-9
    assert max(float(np.abs(np.asarray(a)).max()) for a in jax.tree_util.tree_leaves(g_whole)) > 1e-4


def test_update_changes_weights(tiny_model_dir) -> None:
    learner, initial = _learner(tiny_model_dir, 4), _learner(tiny_model_dir, 4)
    learner.update(_batch(), P)
    moved = [
        float(np.abs(np.asarray(a) - np.asarray(b)).max())
        for a, b in zip(
            jax.tree_util.tree_leaves(learner.params), jax.tree_util.tree_leaves(initial.params), strict=True
        )
    ]
    assert max(moved) > 1e-4


def test_update_raises_log_probs_of_positive_advantage_tokens(tiny_model_dir) -> None:
    batch = _batch(1)
    batch["advantages"] = np.where(np.arange(B)[:, None] < 4, 1.0, -1.0).astype(np.float32) * batch["response_mask"]
    learner = _learner(tiny_model_dir, 4, lr=3e-3)
    learner.update(batch, P)
    learner.update(batch, P)
    initial = _learner(tiny_model_dir, 4)

    def log_probs(lrn: JaxLearner) -> np.ndarray:
        ids, mask, pos = batch["input_ids"], batch["attention_mask"], batch["position_ids"]
        return np.asarray(response_log_probs(lrn.model, lrn.params, ids, mask, pos, P)[0])

    # the same tokens under the updated and the initial weights
    delta = (log_probs(learner) - log_probs(initial)) * batch["response_mask"]
    assert delta[:4].sum() > 0 > delta[4:].sum()


def test_metrics_report_gap_and_finite_values(tiny_model_dir) -> None:
    batch = _batch(2)
    m = _learner(tiny_model_dir, 4, kl_coef=0.1).update(batch, P)
    assert all(np.isfinite(v) for v in m.values())
    # the random model gives ~log(1/49152) = -10.80 to every token: close to the constant rollout log-probs
    assert m["logprob_gap/rollout_vs_learner_max"] < 0.5
    assert m["actor/kl"] >= 0.0 and m["actor/entropy"] > 10.0


def test_missing_keys_and_bad_micro_batch_are_named(tiny_model_dir) -> None:
    learner = _learner(tiny_model_dir, 3)
    batch = _batch()
    with pytest.raises(ValueError, match="not divisible by micro_batch_size=3"):
        learner.update(batch, P)
    del batch["ref_log_probs"]
    with pytest.raises(KeyError, match="ref_log_probs"):
        _learner(tiny_model_dir, 4, kl_coef=0.01).update(batch, P)
    # Without a KL loss the reference log-probs are not needed (the actor_ref role skips that forward).
    metrics = _learner(tiny_model_dir, 4).update(batch, P)
    assert "actor/kl" not in metrics and np.isfinite(metrics["actor/loss"])


def test_truncated_is_scales_the_policy_loss_by_the_capped_ratio(tiny_model_dir) -> None:
    batch = _batch(3)
    _, plain, log_probs = learner_gradients(_learner(tiny_model_dir, 4), batch, P)
    # rollout log-probs 1 nat below the learner's: every weight is min(e, 1.5) = 1.5
    batch["rollout_log_probs"] = (log_probs - 1.0).astype(np.float32)
    _, tis, _ = learner_gradients(_learner(tiny_model_dir, 4, is_cap=1.5), batch, P)
    assert tis["rollout_is_weight"] == pytest.approx(1.5, rel=1e-5)
    assert tis["pg_loss"] == pytest.approx(1.5 * plain["pg_loss"], rel=1e-4, abs=1e-7)
    # rollout equal to the learner: weights 1, the loss unchanged
    batch["rollout_log_probs"] = log_probs
    _, same, _ = learner_gradients(_learner(tiny_model_dir, 4, is_cap=1.5), batch, P)
    assert same["rollout_is_weight"] == pytest.approx(1.0, abs=1e-5)
    assert same["pg_loss"] == pytest.approx(plain["pg_loss"], rel=1e-4, abs=1e-7)


def _leaves(learner: JaxLearner) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(learner.params)]


def test_one_compiled_program_per_shape(tiny_model_dir) -> None:
    learner = _learner(tiny_model_dir, 4)
    first = learner.update(_batch(0), P)
    second = learner.update(_batch(1), P)  # same shapes: no new program
    assert first["learner/compiles_count"] == second["learner/compiles_count"] == 1
    assert first["learner/compile_seconds"] > 0 and second["learner/compile_seconds"] == 0
    wider = synthetic_batch(B, P, 2 * R, vocab=learner.config.vocab_size)
    third = learner.update(wider, P)  # a response bucket twice as wide: one more program
    assert third["learner/compiles_count"] == 2


def test_remat_gives_the_same_update(tiny_model_dir) -> None:
    # SGD: the update is linear in the gradient (Adam's first step is ~lr * sign(g), which float noise
    # can flip for near-zero gradients)
    loss = LossSettings(0.2, 0.2, 0.0, "low_var_kl", 1.0, old_from_batch=False)
    sgd = {**_opt(0.5), "name": "sgd"}
    plain = JaxLearner(str(tiny_model_dir), sgd, loss, 4)
    remat = JaxLearner(str(tiny_model_dir), sgd, loss, 4, remat=True)
    m_plain, m_remat = plain.update(_batch(), P), remat.update(_batch(), P)
    assert m_plain["actor/loss"] == pytest.approx(m_remat["actor/loss"], abs=1e-6)
    for a, b in zip(_leaves(plain), _leaves(remat), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_bfloat16_compute_keeps_float32_masters(tiny_model_dir) -> None:
    f32, bf16 = _learner(tiny_model_dir, 4), _learner(tiny_model_dir, 4, compute_dtype="bfloat16")
    m32, m16 = f32.update(_batch(), P), bf16.update(_batch(), P)
    assert all(x.dtype == np.float32 for x in _leaves(bf16))  # master weights
    assert all(
        x.dtype == np.float32 for x in jax.tree_util.tree_leaves(bf16.opt_state) if hasattr(x, "dtype") and x.ndim
    )
    # bfloat16 keeps ~3 significant digits: the loss agrees to ~1e-2 relative
    assert m16["actor/loss"] == pytest.approx(m32["actor/loss"], rel=5e-2, abs=5e-3)
    assert m16["logprob_gap/rollout_vs_learner_max"] < 0.5


def test_dual_clip_and_dr_grpo_settings_reach_the_loss(tiny_model_dir) -> None:
    batch = _batch(4)
    base = LossSettings(0.2, 0.2, 0.0, "low_var_kl", 1.0, old_from_batch=True)
    plain = JaxLearner(str(tiny_model_dir), _opt(), base, 4)
    _, m_plain, lp = learner_gradients(plain, {**batch, "old_log_probs": batch["rollout_log_probs"]}, P)
    # old log-probs far below the policy's: ratios ~e^3 > c for every token; negative advantages hit the bound
    old = (lp - 3.0).astype(np.float32)
    dual = JaxLearner(str(tiny_model_dir), _opt(), replace(base, clip_ratio_c=3.0), 4)
    _, m_dual, _ = learner_gradients(dual, {**batch, "old_log_probs": old}, P)
    negative = (batch["advantages"] < 0) & (batch["response_mask"] > 0)
    assert m_dual["pg_clipfrac_lower"] == pytest.approx(negative.sum() / batch["response_mask"].sum(), rel=1e-5)
    norm = JaxLearner(
        str(tiny_model_dir), _opt(), replace(base, loss_agg_mode="seq-mean-token-sum-norm", loss_scale_constant=16.0), 4
    )
    summed = JaxLearner(str(tiny_model_dir), _opt(), replace(base, loss_agg_mode="seq-mean-token-sum"), 4)
    same = {**batch, "old_log_probs": lp}
    _, m_norm, _ = learner_gradients(norm, same, P)
    _, m_sum, _ = learner_gradients(summed, same, P)
    assert m_norm["pg_loss"] == pytest.approx(m_sum["pg_loss"] / 16.0, rel=1e-5, abs=1e-8)
    assert m_plain["pg_clipfrac_lower"] == 0.0


def _opt(lr: float = 1e-3) -> dict:
    return adamw_section(lr)


def test_old_log_probs_from_the_rollout_are_the_samplers(tiny_model_dir) -> None:
    """``old_log_prob_source=rollout``: the clipped ratio is against ``rollout_log_probs`` (no recompute),
    exactly as if the actor copy had sent those values as ``old_log_probs``."""
    overrides = {
        "use_kl_loss": False,
        "kl_loss_coef": 0.0,
        "old_log_prob_source": "rollout",
        "rollout_is": "tis",
        "rollout_is_cap": 2.0,
    }
    algorithm = {**asdict(AlgorithmConfig()), **overrides}  # the schema's section, as a merged config has it
    from_rollout = LossSettings.from_config(algorithm, {"loss_scale_constant": 1.0, "reference_in_learner": False}, 1.0)
    assert from_rollout.old_from_batch and from_rollout.old_key == "rollout_log_probs"
    batch = _batch(4)
    # far below the policy: every ratio clips, so the two runs agree only if both read these values
    batch["rollout_log_probs"] = (batch["rollout_log_probs"] - 1.0).astype(np.float32)
    _, m_rollout, _ = learner_gradients(JaxLearner(str(tiny_model_dir), _opt(), from_rollout, 4), batch, P)
    as_actor = replace(from_rollout, old_key="old_log_probs")
    actor_batch = {**batch, "old_log_probs": batch["rollout_log_probs"]}
    _, m_actor, _ = learner_gradients(JaxLearner(str(tiny_model_dir), _opt(), as_actor, 4), actor_batch, P)
    assert m_rollout["pg_loss"] == pytest.approx(m_actor["pg_loss"], rel=1e-6)
    assert m_rollout["pg_clipfrac"] > 0.5 and m_rollout["rollout_is_weight"] == pytest.approx(1.0)  # old = rollout


def test_loss_metrics_are_means_over_the_updates_optimizer_steps(tiny_model_dir) -> None:
    """Two mini-batches: the first step's ratios are 1 (its old log-probs are the initial policy's), the second's
    are not; the update reports the mean of both steps' metrics, not the first step's alone."""
    loss = LossSettings(0.2, 0.2, 0.0, "low_var_kl", 1.0, old_from_batch=True)

    def learner() -> JaxLearner:
        return JaxLearner(str(tiny_model_dir), adamw_section(1e-2, clip_norm=1e9), loss, 4, mini_batch_sequences=4)

    batch = _batch(5)
    batch["old_log_probs"] = learner_gradients(learner(), batch, P)[2]
    m = learner().update(batch, P)
    halves = [{k: v[:4] for k, v in batch.items()}, {k: v[4:] for k, v in batch.items()}]
    replay = learner()
    _, first, _ = learner_gradients(replay, halves[0], P)
    replay.update(halves[0], P)
    _, second, _ = learner_gradients(replay, halves[1], P)
    assert abs(first["ppo_kl"]) < 1e-6 and abs(second["ppo_kl"]) > 1e-4
    for key in ("ppo_kl", "loss", "pg_clipfrac"):
        assert m[f"actor/{key}"] == pytest.approx((first[key] + second[key]) / 2, rel=1e-4, abs=1e-7), key


def test_export_in_a_16_bit_dtype_is_the_float32_export_rounded(tiny_model_dir) -> None:
    """A weight sync to a bfloat16 engine: the tensors cast on the learner's devices equal the float32 export cast
    on the host (both round to nearest even), at half the bytes."""
    import ml_dtypes

    learner = _learner(tiny_model_dir, 4)
    learner.update(_batch(), P)
    full, half = learner.export_hf(), learner.export_hf("bfloat16")
    assert list(full) == list(half)
    for name, value in full.items():
        assert half[name].dtype == ml_dtypes.bfloat16, name
        np.testing.assert_array_equal(half[name].view(np.uint16), value.astype(ml_dtypes.bfloat16).view(np.uint16))
    assert sum(v.nbytes for v in half.values()) * 2 == sum(v.nbytes for v in full.values())
    assert learner.export_hf("float16")["model.norm.weight"].dtype == np.float16
