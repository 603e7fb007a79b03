"""benchmarks.learning.trl_baseline: its reward wrapper on real grader calls, and its dataset against Relay's own
prompt source (the run itself is the learning benchmark's TRL arm, not a test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.learning.trl_baseline import GradedReward, ordered_problems
from relay.repo import REPO_ROOT


def test_trl_reward_is_relays_grader_and_records_each_call() -> None:
    reward = GradedReward(format_score=0.1)
    completions = [[{"role": "assistant", "content": "3 + 4 = 7\n#### 7"}], "It is #### 8", "no answer"]
    assert reward(completions, ["7", "7", "7"]) == [1.0, 0.1, 0.0]
    assert reward.calls == [{"reward/accuracy": pytest.approx(1 / 3), "reward/format_rate": pytest.approx(2 / 3)}]


def test_trl_reward_grades_each_row_by_its_tasks_grader() -> None:
    from relay.scoring.reasoning_gym import encode_ground_truth

    truth = encode_ground_truth({"answer": "55", "metadata": {"source_dataset": "basic_arithmetic"}})
    reward = GradedReward(format_score=0.1)
    texts = ["47 + 8 = \\boxed{55}", "\\boxed{54}", "\\boxed{3}"]
    got = reward(texts, [truth, truth, "3"], grader=["reasoning_gym", "reasoning_gym", "exact"])
    assert got == [1.0, 0.1, 1.0]


def test_trl_reward_subtracts_relays_overlong_penalty_from_completion_lengths() -> None:
    reward = GradedReward(format_score=0.1, overlong=(128, 32, 1.0))
    completions = ["3 + 4 = 7\n#### 7", "It is #### 8", "no answer"]
    got = reward(completions, ["7", "7", "7"], completion_ids=[[1] * 40, [1] * 112, [1] * 128])
    assert got == pytest.approx([1.0, 0.1 - 0.5, -1.0])
    assert reward.calls[-1]["reward/overlong_full_frac"] == pytest.approx(1 / 3)


def test_trl_dataset_is_relays_training_prompts_in_relays_order(tiny_model_dir: Path) -> None:
    """TRL's rows are the arithmetic preset's training problems in the order Relay's batcher serves them, each
    prompt the messages Relay renders, none of them a held-out problem."""
    from transformers import AutoTokenizer

    from relay.config import load_config
    from relay.tasks.prompt_source import PromptSource
    from relay.tasks.run_tasks import RunTasks

    small = ["data.generate.train_size=64", "data.generate.test_size=16", f"model.path={tiny_model_dir}"]
    cfg = load_config(REPO_ROOT / "configs" / "arithmetic_smollm2.yaml", small).cfg
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    columns = ordered_problems(cfg, tokenizer, steps=2)
    assert len(columns["prompt"]) == 2 * cfg.rollout.batch_size and set(columns["grader"]) == {"reasoning_gym"}
    source = PromptSource.from_config(cfg.data, tokenizer, cfg.rollout.batch_size)
    served = [*source.batcher.next_batch(), *source.batcher.next_batch()]
    assert columns["ground_truth"] == [ex.ground_truth for ex in served]
    tasks = RunTasks.from_config(cfg.data)
    assert columns["prompt"] == [tasks.prompt(ex) for ex in served]
    assert tokenizer.apply_chat_template(columns["prompt"][0], add_generation_prompt=True, tokenize=False) == (
        tasks.render(served[0], tokenizer)
    )
    held_out = {ex.question for ex in tasks.read(None, "test")}
    assert not held_out & {ex.question for ex in served}
