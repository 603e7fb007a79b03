"""Solver mode of the reward role with a real (tiny, random) solver model: one engine call per step for all
of a step's prompts, prompts that fit the limit, and rewards laid out per policy response."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from omegaconf import OmegaConf

from relay.config import load_config
from relay.data_proto import DataProto
from relay.repo import REPO_ROOT
from roles.reward import RewardSettings, RewardWorker

ROWS, SOLVER_N, PROMPT_LIMIT = 6, 2, 96


@pytest.fixture(scope="module")
def worker(tiny_model_dir):
    loaded = load_config(
        REPO_ROOT / "configs" / "tiny.yaml",
        [
            f"model.path={tiny_model_dir}",
            "reward.mode=solver",
            "reward.solver_engine=hf",
            "reward.workers=0",
            f"reward.solver_n={SOLVER_N}",
            "reward.solver_temperature=1.0",
            "reward.solver_max_new_tokens=8",
            f"reward.solver_max_prompt_length={PROMPT_LIMIT}",
            "reward.blocklist=[<cheat>]",
        ],
        environ={},
    )
    section = OmegaConf.to_container(loaded.cfg, resolve=True)["reward"]
    w = RewardWorker(RewardSettings.from_section(section, solver_path=str(tiny_model_dir), seed=3))
    yield w
    w.close()


def _batch() -> DataProto:
    guidelines = ["Add the numbers. " * 40, "Add them.", "<cheat> 5", "Multiply.", "", "Count up."]
    return DataProto.from_dict(
        batch={"response_length": np.ones(ROWS, np.int64)},
        non_tensor={
            "response_text": np.array(guidelines, dtype=object),
            "question": np.array([f"What is {i} + 1?" for i in range(ROWS)], dtype=object),
            "ground_truth": np.array([str(i + 1) for i in range(ROWS)], dtype=object),
            "uid": np.array([str(i // 2) for i in range(ROWS)], dtype=object),
        },
    )


def test_one_engine_call_answers_every_row(worker) -> None:
    engine = worker.solver.engine.engine  # the real HF engine behind the call counter
    seen = []

    @functools.wraps(engine.generate)
    def spy(prompts, sampling):
        seen.append((len(prompts), sampling.n))
        return original(prompts, sampling)

    original = engine.generate
    engine.generate = spy
    try:
        out = worker.score(_batch(), step=0)
        out2 = worker.score(_batch(), step=1)
    finally:
        engine.generate = original
    assert seen == [(ROWS, SOLVER_N), (ROWS, SOLVER_N)]  # one call per step, all rows, n samples each
    m = out.meta_info["metrics"]
    assert m["reward/solver_engine_calls"] == 1.0 and out2.meta_info["metrics"]["reward/solver_engine_calls"] == 1.0
    assert out.batch["scores"].shape == out.batch["acc"].shape == (ROWS,)
    assert set(np.unique(out.batch["scores"] * SOLVER_N)) <= set(range(SOLVER_N + 1))  # means of n 0/1 grades
    assert out.batch["scores"][2] == 0.0 and m["reward/blocked_count"] == 1.0
    assert len(out.non_tensor["solver_response"]) == len(out.non_tensor["extracted_answer"]) == ROWS
    assert m["throughput/solver_tokens_per_s"] > 0 and 0.0 <= m["reward/solver_accuracy"] <= 1.0
    assert m["reward/format_failure_rate"] == pytest.approx(1.0 - m["reward/format_rate"])
    assert m["reward/solver_guidelines_cut"] == 1.0  # the 40-sentence guideline
    assert m["timing/reward_compute"] >= m["timing/solver_generate"]


def test_solver_prompts_hold_question_and_guideline_within_the_limit(worker) -> None:
    batch = _batch()
    prompts, cut, prompts_cut = worker.solver.prompts(
        list(batch.non_tensor["question"]), list(batch.non_tensor["response_text"])
    )
    assert max(map(len, prompts)) <= PROMPT_LIMIT and cut == 1 and prompts_cut == 0
    text = worker.solver.tokenizer.decode(prompts[1])
    assert "What is 1 + 1?" in text and "Add them." in text and "#### <number>" in text
    assert worker.solver.tokenizer.decode(prompts[0]).count("Add the numbers.") < 40


def test_sampling_depends_on_the_step_only(worker) -> None:
    a, b, c = (worker.score(_batch(), step=s).non_tensor["solver_response"] for s in (5, 5, 6))
    assert list(a) == list(b) and list(a) != list(c)
