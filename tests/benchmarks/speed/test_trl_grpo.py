"""The TRL GRPOTrainer baseline runs on the tiny model and reports one timed generation round per step."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks.speed.trl_grpo import gsm8k_prompts, relay_grade_reward, run_trl_grpo


def test_reward_is_relay_grader_score() -> None:
    completions = [[{"role": "assistant", "content": c}] for c in ("#### 4", "#### 5", "no answer")]
    assert relay_grade_reward(completions, ["4", "4", "4"]) == [1.0, 0.1, 0.0]


def _trl_on_gsm8k(model_dir: Path, problems: int, max_prompt_length: int, max_new_tokens: int, steps: int) -> dict:
    """``run_trl_grpo`` on the first ``problems`` GSM8K prompts, 2 samples each, learning rate 1e-6."""
    prompts, truths = gsm8k_prompts(problems)
    return run_trl_grpo(
        str(model_dir),
        prompts,
        truths,
        n=2,
        max_prompt_length=max_prompt_length,
        max_new_tokens=max_new_tokens,
        learning_rate=1e-6,
        steps=steps,
    )


def test_overlong_prompt_is_rejected(tiny_model_dir: Path) -> None:
    with pytest.raises(ValueError, match="max_prompt_length=8"):
        _trl_on_gsm8k(tiny_model_dir, 1, max_prompt_length=8, max_new_tokens=4, steps=1)


def test_two_steps_on_tiny_model(tiny_model_dir: Path) -> None:
    result = _trl_on_gsm8k(tiny_model_dir, 2, max_prompt_length=256, max_new_tokens=8, steps=2)

    assert len(result["seconds_per_step"]) == 2
    assert all(s > 0 for s in result["seconds_per_step"])
    assert len(result["phases"]) == 2
    for seconds, phase in zip(result["seconds_per_step"], result["phases"], strict=True):
        assert phase["generate_and_score"] > 0 and phase["train"] > 0
        assert phase["generate_and_score"] + phase["train"] == pytest.approx(seconds)
        assert phase["generate"] + phase["reward"] <= phase["generate_and_score"]
    assert len(result["rewards"]) == 2
    assert all(math.isfinite(r) and 0.0 <= r <= 1.1 for r in result["rewards"])
    assert len(result["completion_tokens"]) == 2
    assert all(0 < t <= 2 * 2 * 8 for t in result["completion_tokens"])
    assert result["peak_rss_gib"] > 0
    assert set(result["versions"]) == {"trl", "torch", "transformers"}
    trl_config = result["config"]["trl"]
    assert trl_config["generation_batch_size"] == 4 and trl_config["num_generations"] == 2
    assert trl_config["bf16"] is False and trl_config["use_cpu"] is True and trl_config["use_vllm"] is False
