"""The algorithm menu through the real roles, several keys in one run (tiny model, transformers rollout, 2 steps):
ReMax's greedy baseline is sampled and graded beside the step, the adaptive KL controller moves the KL-in-reward
coefficient, and GSPO with sequence-level IS and IcePop's token mask trains on what the roles produced."""

from __future__ import annotations

import numpy as np
import pytest
from transformers import AutoTokenizer

from benchmarks.harness.toy_reward import TOY_REWARD_OVERRIDES
from driver.launch import start_roles, stop_roles
from driver.step import run_step
from placement.plan import build_plan
from relay.grpo import kl_penalized_scores
from relay.grpo.kl_controller import KLController
from relay.tasks.prompt_source import PromptSource
from tests.tiny_runs import tiny_config


def test_remax_adaptive_kl_and_gspo_with_sequence_corrections(ray_session, tiny_model_dir) -> None:
    loaded = tiny_config(
        tiny_model_dir,
        [
            "rollout.engine=hf",
            "data.max_response_length=16",
            *TOY_REWARD_OVERRIDES,
            "algorithm.adv_estimator=remax",
            "algorithm.use_kl_loss=false",
            "algorithm.use_kl_in_reward=true",
            "algorithm.kl_coef=0.1",
            "algorithm.kl_loss_type=k3",
            "algorithm.kl_ctrl.type=adaptive",
            "algorithm.kl_ctrl.target_kl=1e9",  # always below target: the coefficient must shrink every batch
            "algorithm.kl_ctrl.horizon=100",
            "algorithm.policy_loss=gspo",
            "algorithm.loss_agg_mode=seq-mean-token-mean",
            "algorithm.rollout_is=seq_geo_tis",
            "algorithm.rollout_token_mask.enable=true",
            "train.optimizer.lr_schedule.peak_value=1e-2",
        ],
    )
    cfg = loaded.cfg
    roles = start_roles(loaded, build_plan(cfg), str(tiny_model_dir))
    try:
        prompts = PromptSource.from_config(cfg.data, AutoTokenizer.from_pretrained(tiny_model_dir), 4)
        kl_control = KLController.from_config(cfg.algorithm)  # the run's: it adapts from step to step
        steps = [run_step(roles, prompts.next_batch(), cfg, step, kl_control) for step in range(2)]
    finally:
        stop_roles(roles)
    for batch, m in steps:
        # One greedy response per prompt, graded: a share of tokens below 4096, so in [0, 1]
        assert 0.0 <= m["remax/baseline_mean"] <= 1.0 and m["timing/remax_baseline"] > 0
        assert len(batch) == cfg.rollout.batch_size * cfg.rollout.n  # the greedy rows are not trained on
        # ReMax on KL-penalised scores: A = score - kl_coef * KL(response) - the prompt's greedy reward
        b = batch.batch
        penalised, _ = kl_penalized_scores(
            b["scores"], b["rollout_log_probs"], b["ref_log_probs"], b["response_mask"], m["reward/kl_coef"], "k3"
        )
        np.testing.assert_allclose(b["advantages"][:, 0], penalised - b["remax_baselines"], rtol=1e-5, atol=1e-6)
        assert 0.0 <= m["actor/rollout_token_masked"] <= 1.0 and m["actor/rollout_is_weight"] > 0
        assert m["logprob_gap/rollout_vs_learner_max"] < 1e-3
    growth = 1 - 0.2 * cfg.rollout.batch_size * cfg.rollout.n / 100  # error clipped at -0.2 per batch of 16 rows
    assert steps[0][1]["reward/kl_coef"] == pytest.approx(0.1)
    assert steps[1][1]["reward/kl_coef"] == pytest.approx(0.1 * growth)
    assert kl_control.value == pytest.approx(0.1 * growth**2)
