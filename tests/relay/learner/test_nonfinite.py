"""Non-finite guards: a bad step is skipped inside the program, padding junk is ignored, runs of skips stop."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks.harness.synthetic import adamw_section, synthetic_batch
from relay.learner.grpo_loss import LossSettings
from relay.learner.learner import JaxLearner, NonFiniteUpdateError, non_finite_message
from relay.learner.train_step import mask_padding, tree_all_finite
from relay.learner.update_metrics import log_prob_gap

P, R, B = 8, 8, 8
NAN, INF = float("nan"), float("inf")

# -- pure pieces -------------------------------------------------------------------------------------------


def test_tree_all_finite_golden() -> None:
    assert bool(tree_all_finite({"a": jnp.array([1.0, 2.0]), "b": jnp.float32(3.0)}))
    assert not bool(tree_all_finite({"a": jnp.array([1.0, NAN]), "b": jnp.float32(3.0)}))
    assert not bool(tree_all_finite([jnp.array([INF])]))
    assert not bool(tree_all_finite((jnp.float32(-INF), {"w": jnp.zeros((2, 2))})))
    assert bool(tree_all_finite({"count": jnp.int32(7), "w": jnp.zeros(3)}))  # integer leaves are finite
    assert bool(tree_all_finite({}))
    assert not bool(jax.jit(tree_all_finite)({"a": jnp.array([0.0, NAN])}))


def test_mask_padding_golden() -> None:
    batch = {
        "slot_mask": jnp.array([[1.0, 1.0, 0.0]]),
        "advantages": jnp.array([[0.5, -1.0, NAN]]),
        "ref_log_probs": jnp.array([[-1.0, -2.0, -INF]]),
        "old_log_probs": jnp.array([[-1.0, NAN, INF]]),
        "input_ids": jnp.array([[7, 8, 9]]),
    }
    out = mask_padding(batch)
    np.testing.assert_array_equal(out["advantages"], [[0.5, -1.0, 0.0]])
    np.testing.assert_array_equal(out["ref_log_probs"], [[-1.0, -2.0, 0.0]])
    np.testing.assert_array_equal(out["old_log_probs"], [[-1.0, NAN, 0.0]])  # a response token keeps its NaN
    assert out["input_ids"] is batch["input_ids"]


def test_gap_ignores_padding_junk() -> None:
    a = np.array([[-1.0, -2.0, NAN]], np.float32)
    b = np.array([[-1.5, -2.0, -3.0]], np.float32)
    assert log_prob_gap(a, b, np.array([[1.0, 1.0, 0.0]], np.float32)) == (0.25, 0.5)


def test_non_finite_message_names_the_count_and_what_to_check() -> None:
    message = non_finite_message(3, 3, NAN, INF)
    assert message.startswith("3 consecutive optimizer steps had a non-finite loss or gradient (last: loss=nan")
    for part in ("grad_norm=inf", "train.max_consecutive_skips=3", "train.optimizer.lr_schedule.peak_value"):
        assert part in message
    assert "\n" not in message  # the driver shows the last line of a role's error


# -- on the tiny model -------------------------------------------------------------------------------------


def _learner(model_dir: Any, kl_coef: float = 0.0, kl_type: str = "low_var_kl", **kw: Any) -> JaxLearner:
    loss = LossSettings(0.2, 0.2, kl_coef, kl_type, 1.0, old_from_batch=False, rollout_is_cap=kw.pop("cap", None))
    return JaxLearner(str(model_dir), adamw_section(1e-3), loss, kw.pop("micro", 4), **kw)


def _batch(seed: int = 0) -> dict[str, np.ndarray]:
    return synthetic_batch(B, P, R, vocab=5000, seed=seed)


def _host(tree: Any) -> list[np.ndarray]:
    """Copies of every leaf (params are donated to the next step, so keep no views of their buffers)."""
    return [np.array(x, copy=True) for x in jax.tree_util.tree_leaves(tree)]


def _identical(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_nan_advantage_skips_the_step_and_a_finite_batch_then_updates_normally(tiny_model_dir) -> None:
    learner = _learner(tiny_model_dir)
    params, opt_state = _host(learner.params), _host(learner.opt_state)
    bad = _batch()
    bad["advantages"][1, 0] = NAN  # a response token (row 1 has a full response)
    m = learner.update(bad, P)
    assert m["learner/skipped_steps"] == 1.0 and m["learner/skipped_total"] == 1.0
    assert m["learner/consecutive_skips"] == 1.0
    assert m["actor/optimizer_steps"] == 0.0 and learner.optimizer_steps == 0
    assert not np.isfinite(m["actor/loss"])
    assert _identical(_host(learner.params), params)
    assert _identical(_host(learner.opt_state), opt_state)

    good = _batch(1)
    m = learner.update(good, P)
    assert m["learner/skipped_steps"] == 0.0 and m["learner/skipped_total"] == 1.0
    assert m["learner/consecutive_skips"] == 0.0 and m["actor/optimizer_steps"] == 1.0
    assert all(np.isfinite(v) for v in m.values())
    # the skip left no trace: the same update as a fresh learner's first one (AdamW's count included)
    fresh = _learner(tiny_model_dir)
    fresh.update(good, P)
    assert _identical(_host(learner.params), _host(fresh.params))
    assert _identical(_host(learner.opt_state), _host(fresh.opt_state))
    assert not _identical(_host(learner.params), params)


def test_inf_ref_log_prob_makes_an_infinite_loss_and_is_skipped(tiny_model_dir) -> None:
    # k1 KL: an infinite loss whose gradient is finite, so only the loss check catches it
    learner = _learner(tiny_model_dir, kl_coef=0.1, kl_type="k1")
    params = _host(learner.params)
    bad = _batch()
    bad["ref_log_probs"][1, 2] = -INF
    m = learner.update(bad, P)
    assert m["learner/skipped_steps"] == 1.0 and np.isinf(m["actor/loss"])
    assert np.isfinite(m["actor/grad_norm"])
    assert _identical(_host(learner.params), params)


def test_junk_on_padding_positions_does_not_poison_the_update(tiny_model_dir) -> None:
    clean = _batch(2)
    junk = {k: v.copy() for k, v in clean.items()}
    pad = junk["response_mask"] == 0
    assert pad.any()
    junk["advantages"][pad] = NAN
    junk["ref_log_probs"][pad] = -INF
    junk["rollout_log_probs"][pad] = NAN
    settings = {"kl_coef": 0.1, "kl_type": "k1", "cap": 2.0}
    with_junk, reference = _learner(tiny_model_dir, **settings), _learner(tiny_model_dir, **settings)
    m = with_junk.update(junk, P)
    m_ref = reference.update(clean, P)
    assert m["learner/skipped_steps"] == 0.0 and m["actor/optimizer_steps"] == 1.0
    assert all(np.isfinite(v) for v in m.values()), m
    assert m["actor/loss"] == m_ref["actor/loss"]
    assert m["logprob_gap/rollout_vs_learner_max"] == m_ref["logprob_gap/rollout_vs_learner_max"]
    assert _identical(_host(with_junk.params), _host(reference.params))


def test_consecutive_skips_across_updates_raise_and_a_good_step_resets_them(tiny_model_dir) -> None:
    with pytest.raises(ValueError, match="max_consecutive_skips=0"):
        _learner(tiny_model_dir, max_consecutive_skips=0)
    # two optimizer steps per update (mini-batches of 4 sequences)
    learner = _learner(tiny_model_dir, mini_batch_sequences=4, max_consecutive_skips=3)
    bad, good = _batch(), _batch(1)
    bad["advantages"][:, 0] = NAN  # every row: both mini-batches are bad
    m = learner.update(bad, P)
    assert (m["learner/skipped_steps"], m["learner/consecutive_skips"]) == (2.0, 2.0)
    m = learner.update(good, P)
    assert (m["learner/skipped_steps"], m["learner/consecutive_skips"], m["learner/skipped_total"]) == (0, 0, 2)
    assert learner.optimizer_steps == 2
    learner.update(bad, P)
    with pytest.raises(NonFiniteUpdateError, match=r"^3 consecutive optimizer steps .*max_consecutive_skips=3"):
        learner.update(bad, P)  # the first step of this update is the third in a row
    assert learner.skipped_total == 5 and learner.optimizer_steps == 2


def test_a_bad_batch_counts_once_whatever_the_epochs(tiny_model_dir) -> None:
    # three epochs over one mini-batch: the bad batch is not re-run (and re-counted) in epochs 2 and 3
    learner = _learner(tiny_model_dir, max_consecutive_skips=2)
    bad = _batch()
    bad["advantages"][3, 1] = NAN
    m = learner.update(bad, P, epochs=3)
    assert (m["learner/skipped_steps"], m["learner/consecutive_skips"], m["actor/optimizer_steps"]) == (1, 1, 0)
    m = learner.update(_batch(1), P, epochs=3)
    assert (m["learner/skipped_steps"], m["learner/consecutive_skips"], m["actor/optimizer_steps"]) == (0, 0, 3)
