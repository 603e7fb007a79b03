"""Gradients added into the accumulator layer by layer (``relay.learner.layerwise_grad``, used with ``train.remat`` in
full fine-tuning) equal ``jax.grad``'s, over several micro-batches, tied and untied heads, with the learner's own
reference and with shared prompts."""

import jax
import numpy as np
import pytest

from benchmarks.harness.synthetic import adamw_section, synthetic_batch
from relay.learner.grpo_loss import LossSettings
from relay.learner.learner import JaxLearner
from tests.relay.learner.gradients import learner_gradients

P, R, B = 8, 8, 8


def _gradients(model_dir, layerwise: bool, batch: dict, **kw) -> tuple[list[np.ndarray], dict, np.ndarray]:
    loss = LossSettings(0.2, 0.2, 0.3, "low_var_kl", 1.0, old_from_batch=False, ref_in_learner=True)
    learner = JaxLearner(str(model_dir), adamw_section(1e-3), loss, 2, remat=layerwise, **kw)
    assert learner.layerwise is layerwise
    grads, metrics, log_probs = learner_gradients(learner, batch, P)
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(grads)], metrics, log_probs


@pytest.mark.parametrize("model", ["tiny_model_dir", "tiny_untied_model_dir"])
def test_layerwise_accumulation_equals_jax_grad(model, request) -> None:
    model_dir = request.getfixturevalue(model)
    batch = synthetic_batch(B, P, R, vocab=49152, seed=3)
    plain, m_plain, lp_plain = _gradients(model_dir, False, batch)
    layered, m_layered, lp_layered = _gradients(model_dir, True, batch)
    np.testing.assert_allclose(lp_layered, lp_plain, atol=1e-6)
    for key in ("loss", "kl", "pg_loss", "entropy"):
        assert m_layered[key] == pytest.approx(m_plain[key], rel=1e-5, abs=1e-8), key
    scale = max(float(np.abs(g).max()) for g in plain)
    assert scale > 0
    for a, b in zip(layered, plain, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6 * scale)


def test_layerwise_accumulation_with_shared_prompts(tiny_model_dir) -> None:
    batch = synthetic_batch(B, P, R, vocab=49152, seed=4, group=4)
    plain, _, _ = _gradients(tiny_model_dir, False, batch, share_prompts=True)
    layered, _, _ = _gradients(tiny_model_dir, True, batch, share_prompts=True)
    scale = max(float(np.abs(g).max()) for g in plain)
    for a, b in zip(layered, plain, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6 * scale)


def test_layerwise_accumulation_in_bfloat16_keeps_float32_gradients(tiny_model_dir) -> None:
    batch = synthetic_batch(B, P, R, vocab=49152, seed=5)
    plain, _, _ = _gradients(tiny_model_dir, False, batch, compute_dtype="bfloat16")
    layered, _, _ = _gradients(tiny_model_dir, True, batch, compute_dtype="bfloat16")
    assert all(g.dtype == np.float32 for g in layered)
    flat_plain, flat_layered = np.concatenate([g.ravel() for g in plain]), np.concatenate([g.ravel() for g in layered])
    # bfloat16 rounds each path's activations in its own order: the same gradient to about bfloat16's precision
    assert np.linalg.norm(flat_layered - flat_plain) < 2e-2 * np.linalg.norm(flat_plain)
