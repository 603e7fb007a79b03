"""Solver mode end to end on the tiny model: the policy's outputs go to a frozen solver (vLLM) as guidelines,
all of a step's solver prompts in one engine call, and the step's metrics show the solver's figures."""

from __future__ import annotations

import json

from relay.config import load_config
from relay.repo import REPO_ROOT
from trainer import train

STEPS, PROMPTS, N = 2, 4, 2


def test_solver_mode_trains_with_one_solver_call_per_step(ray_session, tiny_model_dir, tmp_path) -> None:
    loaded = load_config(
        REPO_ROOT / "configs" / "tiny.yaml",
        [
            f"model.path={tiny_model_dir}",
            f"trainer.total_training_steps={STEPS}",
            f"trainer.output_dir={tmp_path}",
            "trainer.run_name=solver",
            f"rollout.batch_size={PROMPTS}",
            f"rollout.n={N}",
            "rollout.engine=hf",  # the engine under test here is the solver's (vLLM)
            "data.prompt_template=guideline",
            "data.max_response_length=16",
            "reward.mode=solver",
            "reward.solver_engine=vllm",
            "reward.solver_n=2",
            "reward.solver_temperature=1.0",
            "reward.solver_max_new_tokens=16",
            "reward.solver_max_prompt_length=256",
            "reward.solver_kv_cache_gib=0.25",
            "reward.resources.cpus=0.25",
            "reward.overlap_with_actor_ref=false",  # the other path; every other trainer test overlaps
            "algorithm.ref_log_prob_source=actor_ref",  # an actor_ref phase to run beside (or here: before) the reward
        ],
        environ={},
    )
    run_dir = tmp_path / "solver"
    assert train(loaded, tiny_model_dir, run_dir) == 0
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(STEPS))
    for r in rows:
        assert r["reward/solver_engine_calls"] == 1.0  # counted at the engine: one batched call per step
        assert r["throughput/solver_tokens_per_s"] > 0 and r["timing/solver_generate"] > 0
        assert 0.0 <= r["reward/solver_accuracy"] <= 1.0 and 0.0 <= r["reward/mean"] <= 1.0
        assert r["reward/solver_response_length_mean"] <= 16
        assert r["reward/solver_prompt_tokens_mean"] <= 256
        assert r["timing/reward_overlap_saving"] == 0.0 and 0.0 < r["timing/reward_share_of_step"] < 1.0
        assert r["timing/actor_ref_and_reward"] >= r["timing/reward_compute"] + r["timing/actor_ref_compute"] - 0.05
        assert r["timing/driver_and_ray_overhead"] >= 0.0
        assert r["actor/optimizer_steps"] >= 1 and r["batch/sequences"] == PROMPTS * N
