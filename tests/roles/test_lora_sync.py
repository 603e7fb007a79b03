"""LoRA through the roles: a sync carries only the adapters, and the rollout (vLLM, adapter merged into its base:
the default ``rollout.lora_serving=false``) and the actor copy (merged too) then score exactly like the learner."""

from __future__ import annotations

from transformers import AutoTokenizer

from benchmarks.harness.toy_reward import TOY_REWARD_OVERRIDES
from driver.launch import start_roles, stop_roles
from driver.step import run_step
from placement.plan import build_plan
from relay.grpo.kl_controller import KLController
from relay.tasks.prompt_source import PromptSource
from tests.tiny_runs import tiny_config


def test_adapter_sync_merged_in_the_rollout_and_the_actor_copy(ray_session, tiny_model_dir) -> None:
    loaded = tiny_config(
        tiny_model_dir,
        [
            "model.lora.rank=4",
            "model.lora.alpha=8",
            "algorithm.old_log_prob_source=actor",
            # a reward with variance in every group (GSM8K grading gives the random model 0 everywhere)
            *TOY_REWARD_OVERRIDES,
            "train.optimizer.lr_schedule.peak_value=5e-2",  # so that one step moves the policy measurably
        ],
    )
    cfg = loaded.cfg
    roles = start_roles(loaded, build_plan(cfg), str(tiny_model_dir))
    prompts = PromptSource.from_config(cfg.data, AutoTokenizer.from_pretrained(tiny_model_dir), cfg.rollout.batch_size)
    try:
        rows = [
            run_step(roles, prompts.next_batch(), cfg, step, KLController.from_config(cfg.algorithm))[1]
            for step in range(3)
        ]
    finally:
        stop_roles(roles)
    # 2 layers x rank 4 x 1024 (in + out over the 7 projections) floats + the scaling: 32 KiB, not the 13 MB model
    assert all(r["sync/bytes"] == 4 * (2 * 4 * 1024 + 1) for r in rows)
    for r in rows[1:]:  # sampled and scored with merged adapters, which moved the policy away from the base
        assert r["actor/kl"] > 1e-4, r["actor/kl"]
        assert r["logprob_gap/rollout_vs_learner_max"] < 1e-4
        assert r["logprob_gap/rollout_vs_actor_max"] < 1e-4
