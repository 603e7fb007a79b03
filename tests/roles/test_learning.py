"""Learning: with a toy reward the tiny policy's mean reward rises within 30 steps.

The reward is the share of response tokens whose id is below 4096 (~8% of the 49152-token
vocabulary under the near-uniform random model). A rise proves the sign of the loss, the
group-relative advantage and the weight sync together: the rollout samples with the weights the
learner just trained.
"""

from __future__ import annotations

import numpy as np
import pytest
from transformers import AutoTokenizer

from driver.pipeline import RolloutPipeline, run_pipelined_step
from placement.plan import build_plan
from relay.config import load_config
from relay.data.prompt_source import PromptSource
from roles.launch import start_roles, stop_roles
from trainer import REPO, run_step

STEPS = 30


@pytest.mark.parametrize(
    "max_staleness",
    [0, pytest.param(1, marks=pytest.mark.slow, id="one-step-off-policy")],
)
def test_mean_reward_rises_with_a_toy_reward(ray_session, tiny_model_dir, max_staleness: int) -> None:
    cfg = load_config(
        REPO / "configs" / "tiny.yaml",
        [
            f"model.path={tiny_model_dir}",
            "reward.mode=function",
            "reward.function=relay.scoring.toy:token_share_reward",
            "reward.function_kwargs={target_stop: 4096}",
            "rollout.batch_size=4",
            "rollout.n=8",
            "data.max_response_length=16",
            "train.optimizer.lr_schedule.peak_value=1e-2",
            "train.micro_batch_size=32",
            "algorithm.use_kl_loss=false",
            f"trainer.max_staleness={max_staleness}",
            f"algorithm.rollout_is={'tis' if max_staleness else 'none'}",
        ],
        environ={},
    )
    loaded, cfg = cfg, cfg.cfg
    roles = start_roles(loaded, build_plan(cfg), str(tiny_model_dir))
    prompts = PromptSource.from_config(cfg.data, AutoTokenizer.from_pretrained(tiny_model_dir), 4)
    pipe = RolloutPipeline(roles, cfg, prompts, max_staleness, 0) if max_staleness else None
    try:
        if pipe is None:
            rewards = [run_step(roles, prompts.next_batch(), cfg, step)[1]["reward/mean"] for step in range(STEPS)]
        else:
            rows = [run_pipelined_step(roles, pipe, cfg, step)[1] for step in range(STEPS)]
            assert max(r["offpolicy/staleness_max"] for r in rows) == max_staleness
            rewards = [r["reward/mean"] for r in rows]
    finally:
        if pipe is not None:
            pipe.close()
        stop_roles(roles)
    first, last = float(np.mean(rewards[:5])), float(np.mean(rewards[-5:]))
    print(f"toy reward: first 5 steps {first:.3f}, last 5 steps {last:.3f}; all: {np.round(rewards, 3).tolist()}")
    assert last > first + 0.2, rewards
