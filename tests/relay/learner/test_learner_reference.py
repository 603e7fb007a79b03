"""The learner's own reference in full fine-tuning (``algorithm.ref_log_prob_source`` learner): a frozen copy of
the initial weights whose log-probs enter the KL loss exactly as the actor_ref role's would, and which no update
moves."""

import jax
import numpy as np
import pytest

from benchmarks.harness.synthetic import adamw_section, synthetic_batch
from relay.learner.grpo_loss import LossSettings
from relay.learner.learner import JaxLearner
from tests.relay.learner.gradients import learner_gradients

P, R, B = 8, 8, 8


def _batch(seed: int) -> dict[str, np.ndarray]:
    return synthetic_batch(B, P, R, vocab=49152, seed=seed)


def _learner(model_dir, ref_in_learner: bool) -> JaxLearner:
    loss = LossSettings(0.2, 0.2, 0.5, "low_var_kl", 1.0, old_from_batch=False, ref_in_learner=ref_in_learner)
    return JaxLearner(str(model_dir), adamw_section(1e-2, clip_norm=1e9), loss, 4)


def _host(tree) -> list[np.ndarray]:
    return [np.array(x) for x in jax.tree_util.tree_leaves(tree)]


def test_the_learners_reference_is_the_initial_model_and_stays_so(tiny_model_dir) -> None:
    initial = _learner(tiny_model_dir, ref_in_learner=False)  # never updated: the initial model's log-probs

    def with_initial_reference(seed: int) -> dict[str, np.ndarray]:
        batch = _batch(seed)
        batch["ref_log_probs"] = learner_gradients(initial, batch, P)[2]
        return batch

    own = _learner(tiny_model_dir, ref_in_learner=True)
    fed = _learner(tiny_model_dir, ref_in_learner=False)
    frozen = _host(own.ref_params)
    assert own.update(_batch(0), P)["learner/ref_forward"] == 1.0  # no ref_log_probs in the batch: it needs none
    assert fed.update(with_initial_reference(0), P)["learner/ref_forward"] == 0.0
    for before, after in zip(frozen, _host(own.ref_params), strict=True):
        np.testing.assert_array_equal(before, after)  # the update donated and overwrote the policy, not the copy
    moved = [float(np.abs(a - b).max()) for a, b in zip(_host(own.params), frozen, strict=True)]
    assert max(moved) > 1e-4

    # Second step: the policy has moved, the reference has not. With the same policy weights, the KL loss against
    # the learner's own reference equals the one against the initial model's log-probs handed in.
    fed.params = jax.tree_util.tree_map(lambda x: x.copy(), own.params)
    batch = with_initial_reference(1)
    own_grads, own_metrics, own_lp = learner_gradients(
        own, {**batch, "ref_log_probs": batch["ref_log_probs"] * 0 - 9}, P
    )
    fed_grads, fed_metrics, fed_lp = learner_gradients(fed, batch, P)
    np.testing.assert_allclose(own_lp, fed_lp, atol=1e-6)
    assert own_metrics["kl"] > 1e-4  # the first update moved the policy away from the reference
    assert own_metrics["kl"] == pytest.approx(fed_metrics["kl"], rel=1e-4, abs=1e-8)
    assert own_metrics["loss"] == pytest.approx(fed_metrics["loss"], rel=1e-4, abs=1e-8)
    for a, b in zip(_host(own_grads), _host(fed_grads), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7)
