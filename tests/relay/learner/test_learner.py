"""The JAX learner: micro-batching does not change the update, and the update follows the advantage."""

import jax
import numpy as np
import pytest

from relay.learner.grpo_loss import LossSettings
from relay.learner.learner import JaxLearner
from relay.models.jax_logprobs import response_log_probs

P, R, B = 8, 8, 8


def _batch(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(3, 5000, (B, P + R)).astype(np.int32)
    mask = np.ones((B, P + R), np.int32)
    mask[:4, :3] = 0  # left-padded prompts
    mask[::2, P + 5 :] = 0  # short responses
    response_mask = mask[:, P:].astype(np.float32)
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "position_ids": np.clip(np.cumsum(mask, 1) - 1, 0, None).astype(np.int32),
        "response_mask": response_mask,
        "advantages": (rng.normal(size=(B, 1)) * response_mask).astype(np.float32),
        "ref_log_probs": np.full((B, R), -10.8, np.float32),
        "rollout_log_probs": np.full((B, R), -10.8, np.float32),
    }


def _learner(model_dir, micro: int, lr: float = 1e-3, kl_coef: float = 0.0, is_cap: float | None = None) -> JaxLearner:
    loss = LossSettings(0.2, 0.2, kl_coef, "low_var_kl", 1.0, old_from_batch=False, rollout_is_cap=is_cap)
    optimizer = {
        "name": "adamw",
        "clip_norm": 1e9,
        "weight_decay": 0.0,
        "b1": 0.9,
        "b2": 0.999,
        "eps": 1e-8,
        "lr_schedule": {
            "type": "constant",
            "peak_value": lr,
            "warmup_ratio": 0.0,
            "warmup_steps": None,
            "init_value": 0.0,
            "end_value": 0.0,
        },
    }
    return JaxLearner(str(model_dir), optimizer, loss, micro)


def test_micro_batch_size_does_not_change_the_gradients(tiny_model_dir) -> None:
    batch = _batch()
    whole, micro = _learner(tiny_model_dir, 8), _learner(tiny_model_dir, 1)
    g_whole, m_whole, lp_whole = whole.gradients(batch, P)
    g_micro, m_micro, lp_micro = micro.gradients(batch, P)
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
        _learner(tiny_model_dir, 4).update(batch, P)


def test_truncated_is_scales_the_policy_loss_by_the_capped_ratio(tiny_model_dir) -> None:
    batch = _batch(3)
    _, plain, log_probs = _learner(tiny_model_dir, 4).gradients(batch, P)
    # rollout log-probs 1 nat below the learner's: every weight is min(e, 1.5) = 1.5
    batch["rollout_log_probs"] = (log_probs - 1.0).astype(np.float32)
    _, tis, _ = _learner(tiny_model_dir, 4, is_cap=1.5).gradients(batch, P)
    assert tis["rollout_is_weight"] == pytest.approx(1.5, rel=1e-5)
    assert tis["pg_loss"] == pytest.approx(1.5 * plain["pg_loss"], rel=1e-4, abs=1e-7)
    # rollout equal to the learner: weights 1, the loss unchanged
    batch["rollout_log_probs"] = log_probs
    _, same, _ = _learner(tiny_model_dir, 4, is_cap=1.5).gradients(batch, P)
    assert same["rollout_is_weight"] == pytest.approx(1.0, abs=1e-5)
    assert same["pg_loss"] == pytest.approx(plain["pg_loss"], rel=1e-4, abs=1e-7)
