"""The packed learner equals the padded learner on the same batch."""

import jax
import numpy as np
import pytest

from benchmarks.harness.synthetic import adamw_section, synthetic_batch
from relay.learner.grpo_loss import LossSettings
from relay.learner.learner import JaxLearner
from tests.relay.learner.gradients import learner_gradients


def _loss(mode: str) -> LossSettings:
    return LossSettings(
        0.2, 0.2, 0.01, "low_var_kl", 1.0, old_from_batch=False, loss_agg_mode=mode, loss_scale_constant=16.0
    )


def _learners(model_dir, loss: LossSettings) -> dict[bool, JaxLearner]:
    """A padded (False) and a packed (True) learner; rows of 61 tokens."""
    return {
        packing: JaxLearner(str(model_dir), adamw_section(1e-3), loss, 4, packing=packing, pack_width=61)
        for packing in (False, True)
    }


def test_packed_learner_equals_padded_learner(tiny_model_dir) -> None:
    """Same batch, one learner on padded rows and one on packed rows: same loss, same per-token log-probs
    (1e-5) and the same update. Real lengths are 18, 29, 18, 29, 21, 32, 21, 32 (200 tokens, 256 padded);
    rows of 61 hold 32 + 29, 32 + 29, 21 + 21 + 18 and 18 (244 token positions computed)."""
    P, R = 16, 16
    learners = _learners(tiny_model_dir, _loss("token-mean"))
    batch = synthetic_batch(8, P, R, vocab=learners[True].config.vocab_size, seed=5)
    out = {packing: learner.update(batch, P) for packing, learner in learners.items()}
    assert out[True]["actor/loss"] == pytest.approx(out[False]["actor/loss"], rel=1e-5, abs=1e-7)
    for key in ("logprob_gap/rollout_vs_learner_mean", "logprob_gap/rollout_vs_learner_max", "actor/kl"):
        assert out[True][key] == pytest.approx(out[False][key], abs=1e-5)
    assert out[True]["batch/padding_share"] < out[False]["batch/padding_share"]
    assert out[False]["batch/padding_share"] == pytest.approx(out[False]["batch/padding_share_unpacked"])
    leaves = [jax.tree_util.tree_leaves(learners[p].params) for p in (False, True)]
    for a, b in zip(*leaves, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5)  # lr 1e-3: 1% of an AdamW step
    # The next step's log-probs (after the same update) agree too.
    _, _, lp_padded = learner_gradients(learners[False], batch, P)
    _, _, lp_packed = learner_gradients(learners[True], batch, P)
    np.testing.assert_allclose(lp_packed, lp_padded, atol=1e-5)


# The sequence-level aggregations divide by per-sequence token counts (a packed row holds several sequences): the
# packed gradients must equal the padded ones. The update itself is the token-mean test's.
@pytest.mark.parametrize("mode", ["seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_packed_gradients_equal_padded_gradients(tiny_model_dir, mode: str) -> None:
    P, R = 16, 16
    learners = _learners(tiny_model_dir, _loss(mode))
    batch = synthetic_batch(8, P, R, vocab=learners[True].config.vocab_size, seed=5)
    out = {packing: learner_gradients(learner, batch, P) for packing, learner in learners.items()}
    (grads_padded, m_padded, lp_padded), (grads_packed, m_packed, lp_packed) = out[False], out[True]
    assert m_packed["loss"] == pytest.approx(m_padded["loss"], rel=1e-5, abs=1e-7)
    for a, b in zip(jax.tree_util.tree_leaves(grads_padded), jax.tree_util.tree_leaves(grads_packed), strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(lp_packed, lp_padded, atol=1e-5)


def test_shared_prompt_learner_equals_unshared_learner(tiny_model_dir) -> None:
    """Groups of 4 samples of one prompt: one learner lays each prompt out once per row (branch-masked
    attention), the other once per sequence. Same loss, per-token log-probs (1e-5) and update; the shared
    layout computes fewer tokens (batch/shared_prompt_share > 0)."""
    P, R = 16, 16
    loss = LossSettings(0.2, 0.2, 0.01, "low_var_kl", 1.0, old_from_batch=False)
    learners = {
        share: JaxLearner(str(tiny_model_dir), adamw_section(1e-3), loss, 4, pack_width=96, share_prompts=share)
        for share in (False, True)
    }
    batch = synthetic_batch(8, P, R, vocab=learners[True].config.vocab_size, seed=5, group=4)
    out = {share: learner.update(batch, P) for share, learner in learners.items()}
    assert out[True]["actor/loss"] == pytest.approx(out[False]["actor/loss"], rel=1e-5, abs=1e-7)
    for key in ("logprob_gap/rollout_vs_learner_mean", "logprob_gap/rollout_vs_learner_max", "actor/kl"):
        assert out[True][key] == pytest.approx(out[False][key], abs=1e-5)
    assert out[True]["batch/shared_prompt_share"] > 0.2 and out[False]["batch/shared_prompt_share"] == 0.0
    # AdamW divides by sqrt(v): on a coordinate whose gradient is near 0 the two layouts' float rounding (sums in
    # another order) moves the step by a few % of lr = 1e-3 (seen: 2.6e-5 on 1 of 16384 weights), hence 5e-5.
    for a, b in zip(*(jax.tree_util.tree_leaves(learners[s].params) for s in (False, True)), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=5e-5)
    _, _, lp_unshared = learner_gradients(learners[False], batch, P)
    _, _, lp_shared = learner_gradients(learners[True], batch, P)
    np.testing.assert_allclose(lp_shared, lp_unshared, atol=1e-5)
