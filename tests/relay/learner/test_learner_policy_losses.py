"""The policy losses and rollout corrections inside the learner: the sequence-level ones reduce over each
sequence whether it has a row of its own or shares a packed row (same loss and gradients), and each changes
the update."""

from dataclasses import asdict, replace

import jax
import numpy as np
import pytest

from benchmarks.harness.synthetic import adamw_section, synthetic_batch
from relay.config.algorithm_schema import AlgorithmConfig
from relay.grpo.policy_losses import POLICY_LOSSES
from relay.learner.grpo_loss import LossSettings, policy_loss_config
from relay.learner.learner import JaxLearner
from tests.relay.learner.gradients import learner_gradients

P, R = 16, 16
DEFAULT = policy_loss_config(asdict(AlgorithmConfig()))  # the schema's default algorithm section: vanilla


def _batch(vocab: int) -> dict[str, np.ndarray]:
    batch = synthetic_batch(8, P, R, vocab=vocab, seed=5)
    rng = np.random.default_rng(1)
    # Old log-probs off the policy's by up to ~+-1.5 per token: ratios outside [0.5, 2] for some tokens and sequences.
    noise = rng.normal(scale=0.6, size=batch["old_log_probs"].shape).astype(np.float32)
    batch["old_log_probs"] = batch["rollout_log_probs"] + noise
    return batch


def _gradients(model_dir, settings: LossSettings, packing: bool, batch) -> tuple[list[np.ndarray], dict]:
    learner = JaxLearner(str(model_dir), adamw_section(1e-3), settings, 4, packing=packing, pack_width=61)
    grads, metrics, _ = learner_gradients(learner, batch, P)
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(grads)], metrics


def _settings(name: str, **kw) -> LossSettings:
    return LossSettings(
        0.2,
        0.2,
        0.0,
        "low_var_kl",
        1.0,
        old_from_batch=True,
        loss_agg_mode="seq-mean-token-mean",
        # clip_cov's band widened: the tiny random model's covariances are far below the default (1, 5)
        policy_loss=replace(
            DEFAULT,
            name=name,
            gspo_clip_ratio_low=0.2,
            gspo_clip_ratio_high=0.2,
            clip_cov_lb=-10.0,
            clip_cov_ub=10.0,
        ),
        **kw,
    )


def test_gspo_with_sequence_corrections_packed_equals_padded(tiny_model_dir) -> None:
    corrected = _settings(
        "gspo",
        rollout_is_cap=2.0,
        rollout_is_mode="seq_geo_tis",
        rollout_token_mask=(0.5, 2.0),
        rollout_seq_reject=("product", 0.2, 5.0),
    )
    batch = _batch(49152)
    padded, m_padded = _gradients(tiny_model_dir, corrected, False, batch)
    packed, m_packed = _gradients(tiny_model_dir, corrected, True, batch)
    for key in ("loss", "pg_clipfrac", "rollout_is_weight", "rollout_token_masked", "rollout_seq_rejected"):
        assert m_packed[key] == pytest.approx(m_padded[key], rel=1e-5, abs=1e-7), key
    for a, b in zip(padded, packed, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    # Every correction did something here, and the corrected gradient is not the vanilla one.
    assert 0 < m_packed["rollout_token_masked"] < 1 and 0 < m_packed["rollout_seq_rejected"] < 1
    assert m_packed["rollout_is_weight"] != pytest.approx(1.0, abs=1e-3)
    vanilla, _ = _gradients(tiny_model_dir, replace(corrected, policy_loss=DEFAULT), True, batch)
    assert max(float(np.abs(a - b).max()) for a, b in zip(vanilla, packed, strict=True)) > 1e-6


@pytest.mark.parametrize("name", sorted(set(POLICY_LOSSES) - {"vanilla", "gspo"}))
def test_every_policy_loss_runs_in_the_learner(tiny_model_dir, name: str) -> None:
    """Each loss of the menu through the real learner on packed rows. ``geo_mean`` reduces over sequences, so its
    packed gradients must equal the padded ones (as gspo's above); the token-level ones (``cispo``) and the
    covariance ones need only run: ``clip_cov``'s and ``kl_cov``'s covariance and token choice are per micro-batch
    (as in the paper's code), so two layouts that group the sequences differently agree only in distribution."""
    settings = _settings(name)
    batch = _batch(49152)
    packed, m_packed = _gradients(tiny_model_dir, settings, True, batch)
    assert np.isfinite(m_packed["loss"]) and all(np.all(np.isfinite(g)) for g in packed)
    if name in ("clip_cov", "kl_cov"):
        assert m_packed["pg_cov_selected"] > 0
    if name == "geo_mean":
        padded, m_padded = _gradients(tiny_model_dir, settings, False, batch)
        assert m_packed["loss"] == pytest.approx(m_padded["loss"], rel=1e-5, abs=1e-7)
        for a, b in zip(padded, packed, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
