"""Integration: two GRPO steps of the tiny model through all five phases on a local Ray placement group,
with two rollout replicas (each samples half of the prompts; the driver stacks their rows)."""

from __future__ import annotations

import numpy as np
import pytest
from transformers import AutoTokenizer

from driver.collect import advantage_phase
from driver.launch import start_roles, stop_roles
from driver.role_group import SyncedWeights
from driver.step import run_step
from placement.plan import build_plan
from relay.config import load_config
from relay.grpo.kl_controller import KLController
from relay.repo import REPO_ROOT
from relay.rollout_batch import pop_metrics
from relay.tasks.prompt_source import PromptSource
from roles.role_call import call

PRESET = REPO_ROOT / "configs" / "tiny.yaml"


@pytest.fixture(scope="module")
def pipeline(ray_session, tiny_model_dir):
    cfg = load_config(
        PRESET,
        [
            f"model.path={tiny_model_dir}",
            "algorithm.old_log_prob_source=actor",
            "algorithm.ref_log_prob_source=actor_ref",  # this module tests the actor_ref phase: reference and actor
            "algorithm.kl_loss_coef=0.01",
            "rollout.replicas=2",
            "rollout.resources.cpus=0.25",
        ],
        environ={},
    )
    loaded, cfg = cfg, cfg.cfg
    roles = start_roles(loaded, build_plan(cfg), str(tiny_model_dir))
    prompts = PromptSource.from_config(cfg.data, AutoTokenizer.from_pretrained(tiny_model_dir), cfg.rollout.batch_size)
    yield cfg, roles, prompts
    stop_roles(roles)


def _finite(a: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(a)))


def test_each_phase_hands_on_a_well_formed_batch(pipeline) -> None:
    cfg, roles, prompts = pipeline
    b, n, rmax = cfg.rollout.batch_size, cfg.rollout.n, cfg.data.max_response_length
    step_prompts = prompts.next_batch()

    # 1. rollout: b*n rows, prompt-major, bucketed widths, masks consistent with lengths
    (gen,) = call(["rollout-0"], [roles.rollout[0].generate.remote(step_prompts, 0)], "rollout")
    assert len(gen) == b * n
    p_width, r_width = gen.batch["prompts"].shape[1], gen.batch["responses"].shape[1]
    assert p_width % cfg.train.length_bucket == 0 and r_width % cfg.train.length_bucket == 0
    assert r_width >= gen.batch["response_length"].max() and gen.batch["response_length"].max() <= rmax
    assert gen.batch["input_ids"].shape == gen.batch["attention_mask"].shape == (b * n, p_width + r_width)
    np.testing.assert_array_equal(gen.batch["response_mask"].sum(1), gen.batch["response_length"])
    np.testing.assert_array_equal(gen.batch["attention_mask"][:, p_width:], gen.batch["response_mask"])
    assert list(gen.non_tensor["uid"][:n]) == [step_prompts.non_tensor["uid"][0]] * n
    lp = gen.batch["rollout_log_probs"]
    assert (
        _finite(lp)
        and np.all(lp[gen.batch["response_mask"] > 0] < 0)
        and np.all(lp[gen.batch["response_mask"] == 0] == 0)
    )

    # 2. actor+ref: ref and old-policy log-probs, same shape; the weights are all the initial ones
    (ref,) = call(["actor_ref-0"], [roles.actor_ref[0].compute_log_probs.remote(gen)], "actor_ref")
    mask = gen.batch["response_mask"] > 0
    for key in ("ref_log_probs", "old_log_probs"):
        assert ref.batch[key].shape == (b * n, r_width) and _finite(ref.batch[key])
        assert np.abs(ref.batch[key] - lp)[mask].max() < 1e-4
    # 3. reward: one score per sequence, graded by math-verify
    (rw,) = call(["reward-0"], [roles.reward[0].score.remote(gen)], "reward")
    assert rw.batch["scores"].shape == (b * n,) and set(np.unique(rw.batch["scores"])) <= {0.0, 1.0}
    assert 0.0 <= pop_metrics(rw)["reward/format_rate"] <= 1.0
    assert "timing/rollout_compute" in pop_metrics(gen) and "timing/actor_ref_compute" in pop_metrics(ref)

    # 4. advantage (driver): zero-mean per group, zero on padding
    batch = gen.union(ref).union(rw)
    batch, _ = advantage_phase(batch, cfg)
    adv = batch.batch["advantages"]
    assert adv.shape == (b * n, r_width) and np.all(adv[~mask] == 0)
    seq_adv = adv[:, 0].reshape(b, n)
    np.testing.assert_allclose(seq_adv.sum(1), 0.0, atol=1e-5)

    # 5. update + sync: metrics finite; the engines then hold the learner's new weights
    (out,) = call(["learner-0"], [roles.learner[0].update.remote(batch)], "update")
    weights_ref, metrics = out
    assert all(np.isfinite(v) for v in metrics.values())
    assert metrics["logprob_gap/rollout_vs_learner_max"] < 1e-4
    assert metrics["sync/bytes"] > 0
    handles = [*roles.rollout, *roles.actor_ref]
    names = ["rollout-0", "rollout-1", "actor_ref-0"]
    synced = call(names, [h.load_weights.remote(weights_ref, 1) for h in handles], "sync")
    assert len(synced) == 3 and all(s["bytes"] == metrics["sync/bytes"] for s in synced)
    roles.weights = SyncedWeights(weights_ref, 1)  # what Roles.sync records


def test_run_step_reports_every_phase(pipeline) -> None:
    cfg, roles, prompts = pipeline
    step_prompts = prompts.next_batch()
    batch, m = run_step(roles, step_prompts, cfg, 1, KLController.from_config(cfg.algorithm))
    # the two replicas' rows are stacked in prompt order, each prompt's samples adjacent
    assert len(roles.rollout) == 2
    np.testing.assert_array_equal(batch.non_tensor["uid"], np.repeat(step_prompts.non_tensor["uid"], cfg.rollout.n))
    for key in (
        "timing/rollout",
        "timing/actor_ref_and_reward",
        "timing/update",
        "timing/sync",
        "timing/step",
        "throughput/rollout_tokens_per_s",
        "throughput/learner_tokens_per_s",
        "reward/mean",
        "actor/kl",
        "logprob_gap/rollout_vs_learner_max",
        "logprob_gap/rollout_vs_actor_max",
        "sync/bytes",
        "sync/seconds",
        "memory/roles_peak_rss_gib",
        "memory/learner_peak_rss_gib",
    ):
        assert key in m and np.isfinite(m[key]), key
    # after a sync, both rollout replicas, the actor copy and the learner score tokens with the same weights
    assert m["logprob_gap/rollout_vs_learner_max"] < 1e-4
    assert m["logprob_gap/rollout_vs_actor_max"] < 1e-4
    assert m["actor_ref/ref_forward"] == 1.0 and 0.0 <= m["batch/padding_share_actor_ref"] < 1.0  # KL loss on
    assert "advantages" in batch.batch
    assert "recovery/stale_rollouts" not in m and m["recovery/restarts"] == 0
