"""Learning: with a toy reward the tiny policy's mean reward rises within 15 steps (30 for LoRA and one step off
policy, which move it less per step).

The reward is the share of response tokens whose id is below 4096 (~8% of the 49152-token
vocabulary under the near-uniform random model). A rise proves the sign of the loss, the
group-relative advantage and the weight sync together: the rollout samples with the weights the
learner just trained.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from transformers import AutoTokenizer

from benchmarks.harness.toy_reward import TOY_REWARD_OVERRIDES
from driver.launch import start_roles, stop_roles
from driver.pipeline import RolloutPipeline, run_pipelined_step
from driver.step import run_step
from placement.plan import build_plan
from relay.config import load_config
from relay.grpo.kl_controller import KLController
from relay.repo import REPO_ROOT
from relay.tasks.prompt_source import PromptSource


@pytest.fixture(scope="module")
def steerable_tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random model with one direction ``u`` added to the embeddings of tokens 0-4095 (``+0.3 u``; the
    embeddings are tied, so also their output rows).

    The toy reward's tokens are a random set of 8% of the vocabulary: raising all of them at once takes moving
    their own output rows, which full fine-tuning does and LoRA cannot (adapters on the projections steer the
    normalised final hidden state, whose dot product with the mean of 4096 random rows is ~0). Here that set
    shares a direction, as a set of related tokens in a trained model does, and steering the hidden state
    towards it raises them all: the test of whether the adapters learn and the sync carries them.
    """
    from safetensors.numpy import load_file, save_file

    from relay.models.tiny import build_tiny_llama

    out = build_tiny_llama(tmp_path_factory.mktemp("tiny-llama-steerable"))
    weights = load_file(str(out / "model.safetensors"))
    embed = weights["model.embed_tokens.weight"].copy()
    u = np.random.default_rng(7).standard_normal(embed.shape[1]).astype(np.float32)
    embed[:4096] += 0.3 * u / np.linalg.norm(u)
    weights["model.embed_tokens.weight"] = embed
    save_file(weights, str(out / "model.safetensors"), {"format": "pt"})
    return out


@pytest.mark.parametrize(
    ("max_staleness", "lora", "steps", "lr"),
    [
        # lr 3e-2: the reward's mean over the last 5 of 15 steps is ~0.7, over the first 5 ~0.11 (AMD EPYC)
        (0, False, 15, 3e-2),
        pytest.param(0, True, 30, 5e-2, marks=pytest.mark.slow, id="lora"),  # ~2 min; LoRA unit tests run by default
        pytest.param(1, False, 30, 1e-2, marks=pytest.mark.slow, id="one-step-off-policy"),
    ],
)
def test_mean_reward_rises_with_a_toy_reward(
    ray_session, tiny_model_dir, request, max_staleness: int, lora: bool, steps: int, lr: float
) -> None:
    """``lora``: rank-8 adapters on every projection train on the frozen (steerable) tiny model; vLLM serves base +
    adapter and each sync sends only the adapters."""
    if lora:
        tiny_model_dir = request.getfixturevalue("steerable_tiny_model_dir")  # built only for the case that reads it
    cfg = load_config(
        REPO_ROOT / "configs" / "tiny.yaml",
        [
            f"model.path={tiny_model_dir}",
            *TOY_REWARD_OVERRIDES,
            "rollout.batch_size=4",
            "rollout.n=8",
            "data.max_response_length=16",
            # Adapters move the policy less per step than every weight does (B starts at zero): a higher lr.
            f"train.optimizer.lr_schedule.peak_value={lr}",
            "train.micro_batch_size=32",
            "algorithm.use_kl_loss=false",
            f"trainer.max_staleness={max_staleness}",
            f"algorithm.rollout_is={'tis' if max_staleness else 'none'}",
            *(["model.lora.rank=8", "model.lora.alpha=16", "rollout.lora_serving=true"] if lora else []),
        ],
        environ={},
    )
    loaded, cfg = cfg, cfg.cfg
    roles = start_roles(loaded, build_plan(cfg), str(tiny_model_dir))
    prompts = PromptSource.from_config(cfg.data, AutoTokenizer.from_pretrained(tiny_model_dir), 4)
    pipe = (
        RolloutPipeline(roles, cfg, prompts, max_staleness, 0, KLController.from_config(cfg.algorithm))
        if max_staleness
        else None
    )
    try:
        if pipe is None:
            rows = [
                run_step(roles, prompts.next_batch(), cfg, step, KLController.from_config(cfg.algorithm))[1]
                for step in range(steps)
            ]
        else:
            rows = [run_pipelined_step(roles, pipe, cfg, step)[1] for step in range(steps)]
            assert max(r["offpolicy/staleness_max"] for r in rows) == max_staleness
        rewards = [r["reward/mean"] for r in rows]
    finally:
        if pipe is not None:
            pipe.close()
        stop_roles(roles)
    first, last = float(np.mean(rewards[:5])), float(np.mean(rewards[-5:]))
    print(f"toy reward: first 5 steps {first:.3f}, last 5 steps {last:.3f}; all: {np.round(rewards, 3).tolist()}")
    assert last > first + 0.2, rewards
    gaps = [r["logprob_gap/rollout_vs_learner_max"] for r in rows]
    print(f"rollout-vs-learner log-prob gap, max per step: {np.round(gaps, 6).tolist()}")
    print(f"sync bytes per step: {rows[-1]['sync/bytes']:.0f}")
    if max_staleness == 0:  # on-policy: the rollout sampled with exactly the weights the learner scores with
        assert max(gaps) < 1e-3, gaps
    if lora:
        # Only the adapters: 2 layers x rank 8 x 1024 (in + out summed over the 7 projections) floats = 64 KiB,
        # where the tiny model's weights are ~13 MB (its 49152 x 64 embedding alone 12.6 MB).
        assert rows[-1]["sync/bytes"] < 100_000, rows[-1]["sync/bytes"]
