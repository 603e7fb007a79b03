"""RolloutWorker.evaluate as a plain object (no Ray): greedy + k samples per problem, with either engine,
without touching training's sampling."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from driver.role_settings import rollout_worker_settings
from relay.config import load_config
from relay.repo import REPO_ROOT
from relay.tasks.prompt_source import PromptSource, validation_prompts
from roles.rollout import RolloutWorker

K = 2
PROBLEMS = 3


def _worker(model_dir: Path, engine: str) -> tuple[RolloutWorker, object]:
    loaded = load_config(
        REPO_ROOT / "configs" / "tiny.yaml",
        [f"model.path={model_dir}", f"rollout.engine={engine}", "data.max_response_length=16"],
        environ={},
    )
    return RolloutWorker(rollout_worker_settings(loaded, str(model_dir), 0)), loaded.cfg


@pytest.fixture(scope="module")
def hf_worker(tiny_model_dir):
    return _worker(tiny_model_dir, "hf")


@pytest.fixture(scope="module")
def vllm_worker(tiny_model_dir):
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{(os.cpu_count() or 1) - 1}")
    return _worker(tiny_model_dir, "vllm")


def _check_rows(rows, prompts) -> None:
    assert len(rows) == PROBLEMS * (1 + K)
    assert rows.batch["sample_index"].tolist() == [0, 1, 2] * PROBLEMS
    np.testing.assert_array_equal(rows.non_tensor["uid"], np.repeat(prompts.non_tensor["uid"], 1 + K))
    np.testing.assert_array_equal(rows.non_tensor["ground_truth"], np.repeat(prompts.non_tensor["ground_truth"], 1 + K))
    assert rows.batch["response_length"].dtype == np.int32 and rows.batch["finished"].dtype == bool
    assert np.all((rows.batch["response_length"] >= 1) & (rows.batch["response_length"] <= 16))
    assert all(isinstance(t, str) for t in rows.non_tensor["response_text"])
    m = rows.meta_info["metrics"]
    assert m["validation/new_tokens"] == rows.batch["response_length"].sum()
    assert m["timing/validation_generate_compute"] > 0 and m["throughput/validation_tokens_per_s"] > 0
    assert rows.meta_info["weights_version"] == 0


def _greedy(rows) -> list[str]:
    return list(rows.non_tensor["response_text"][rows.batch["sample_index"] == 0])


def _sampled(rows) -> list[str]:
    return list(rows.non_tensor["response_text"][rows.batch["sample_index"] > 0])


def _evaluate_leaves_training_alone(worker: RolloutWorker, cfg, tokenizer) -> None:
    """A training rollout is the same before and after a validation, and so is the torch RNG."""
    train = PromptSource.from_config(cfg.data, tokenizer, 2).next_batch()
    before = worker.generate(train, step=3)
    rng = torch.get_rng_state()
    worker.evaluate(validation_prompts(cfg.data, tokenizer, 2), K, seed=11)
    assert torch.equal(torch.get_rng_state(), rng)
    after = worker.generate(train, step=3)
    np.testing.assert_array_equal(before.batch["responses"], after.batch["responses"])
    assert worker.weights_version == 0


def test_hf_evaluate_greedy_and_samples(hf_worker, tiny_model_dir) -> None:
    worker, cfg = hf_worker
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    prompts = validation_prompts(cfg.data, tokenizer, PROBLEMS)
    done: list[int] = []
    worker.eval_chunk_prompts = lambda k: 2  # two engine calls: 2 prompts, then 1
    try:
        rows = worker.evaluate(prompts, K, seed=5, progress=done.append)
    finally:
        del worker.eval_chunk_prompts
    assert done == [2, 1]
    _check_rows(rows, prompts)
    again = worker.evaluate(prompts, K, seed=6)
    assert _greedy(again) == _greedy(rows)  # greedy ignores the seed (and the chunking)
    assert _sampled(again) != _sampled(rows)
    assert _sampled(worker.evaluate(prompts, K, seed=6)) == _sampled(again)  # the seed fixes the samples
    _evaluate_leaves_training_alone(worker, cfg, tokenizer)


def test_a_user_reward_function_grades_validation_rows_by_their_tokens(hf_worker, tiny_model_dir) -> None:
    """Validation sends the reward role the token fields a user function reads in training (a function reading
    ``responses`` once failed every run with validation: KeyError 'responses')."""

    from benchmarks.harness.toy_reward import token_share
    from relay.config.schema import RewardConfig
    from relay.evaluation.report import grading_chunks
    from roles.reward import RewardSettings, RewardWorker

    worker, cfg = hf_worker
    prompts = validation_prompts(cfg.data, AutoTokenizer.from_pretrained(tiny_model_dir), PROBLEMS)
    rows = worker.evaluate(prompts, K, seed=5)
    toy = "benchmarks.harness.toy_reward:token_share_reward"
    reward_cfg = RewardConfig(mode="function", function=toy, function_kwargs={"target_stop": 4096})
    (chunk,) = grading_chunks(rows)
    scores = RewardWorker(RewardSettings(reward_cfg)).score(chunk).batch["scores"]
    mask = rows.batch["response_mask"]
    assert (mask.sum(axis=1) == rows.batch["response_length"]).all()
    expected = [token_share(r, m, target_ids=range(4096)) for r, m in zip(rows.batch["responses"], mask, strict=True)]
    np.testing.assert_allclose(scores, expected, rtol=1e-6)
    assert 0 < float(np.mean(scores)) < 1  # the tiny model's tokens: some below 4096, most above


def test_hf_chunk_fits_a_training_pass(hf_worker) -> None:
    worker, cfg = hf_worker
    fits = worker.prompts_per_pass * cfg.rollout.n
    assert worker.eval_chunk_prompts(2) == fits // 2 and worker.eval_chunk_prompts(10 * fits) == 1


def test_vllm_evaluate_greedy_and_samples(vllm_worker, tiny_model_dir) -> None:
    worker, cfg = vllm_worker
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    prompts = validation_prompts(cfg.data, tokenizer, PROBLEMS)
    rows = worker.evaluate(prompts, K, seed=5)
    _check_rows(rows, prompts)
    assert worker.eval_chunk_prompts(K) >= 64
    again = worker.evaluate(prompts, K, seed=6)
    assert _greedy(again) == _greedy(rows)
    assert _sampled(again) != _sampled(rows)
    _evaluate_leaves_training_alone(worker, cfg, tokenizer)
