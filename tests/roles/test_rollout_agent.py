"""Multi-turn rollouts from a RolloutWorker built in-process (its tools run in-process too): a model that calls the
calculator, on the transformers engine and on vLLM. The Ray run with the tools role is tests/test_trainer_agent.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf
from transformers import AutoModelForCausalLM, AutoTokenizer

from driver.role_settings import rollout_worker_settings
from relay.config import load_config
from relay.repo import REPO_ROOT
from relay.tasks.prompt_source import PromptSource, validation_prompts
from roles.rollout import RolloutSettings, RolloutWorker

AGENT = ["rollout.agent.enable=true", "rollout.agent.max_turns=3", "data.prompt_template=tools"]


def _worker(model_dir: Path, engine: str) -> tuple[RolloutWorker, object]:
    loaded = load_config(
        REPO_ROOT / "configs" / "tiny.yaml",
        [f"model.path={model_dir}", f"rollout.engine={engine}", "data.max_response_length=48", *AGENT],
        environ={},
    )
    return RolloutWorker(rollout_worker_settings(loaded, str(model_dir), 0)), loaded.cfg


def _forward_log_probs(model, prompt: np.ndarray, response: np.ndarray) -> np.ndarray:
    ids = torch.tensor(np.concatenate([prompt, response])[None].astype(np.int64))
    with torch.no_grad():
        log_probs = torch.log_softmax(model(ids).logits[0].float(), -1)
    positions = torch.arange(len(prompt) - 1, len(prompt) + len(response) - 1)
    return log_probs[positions, torch.from_numpy(response.astype(np.int64))].numpy()


def _check_multi_turn(worker: RolloutWorker, cfg, model_dir: Path) -> None:
    tok = AutoTokenizer.from_pretrained(model_dir)
    prompts = PromptSource.from_config(cfg.data, tok, 4).next_batch()
    out = worker.generate(prompts, step=0)
    b, m = out.batch, out.meta_info["metrics"]
    assert len(out) == 16 and b["tool_calls"].sum() > 0, "the tool-calling model should call the calculator"
    assert m["agent/tool_calls_count"] == b["tool_calls"].sum() and m["agent/turns_mean"] > 1
    assert m["agent/tool_latency_p95_s"] >= m["agent/tool_latency_p50_s"] > 0
    assert len(out.meta_info["tool_spans"]) >= 1
    p = b["prompts"].shape[1]
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    called = np.nonzero(b["tool_calls"])[0]
    for i in called[:3]:
        attended = b["attention_mask"][i, p:].astype(bool)
        trained = b["response_mask"][i].astype(bool)
        tool_tokens = attended & ~trained
        assert tool_tokens.sum() == b["tool_tokens"][i] > 0
        assert "<tool_result>5</tool_result>" in tok.decode(b["responses"][i][attended])
        assert "<tool_result>5</tool_result>" in out.non_tensor["response_text"][i]
        # the engine's log-probs of the model's tokens, turn after turn, are a plain forward's of the whole sequence
        real_prompt = b["prompts"][i][b["attention_mask"][i, :p].astype(bool)]
        reference = _forward_log_probs(model, real_prompt, b["responses"][i][attended])
        gap = np.abs(b["rollout_log_probs"][i][attended] - reference)[trained[attended]]
        assert gap.max() < 2e-3, f"row {i}: engine vs forward on model tokens {gap.max():.2e}"
        assert not b["rollout_log_probs"][i][tool_tokens].any()
    again = worker.generate(prompts, step=0)
    np.testing.assert_array_equal(again.batch["responses"], b["responses"])  # a step's rollout repeats exactly
    np.testing.assert_array_equal(again.batch["response_mask"], b["response_mask"])
    rows = worker.evaluate(validation_prompts(cfg.data, tok, 2), 1, seed=3)
    assert any("<tool_result>" in text for text in rows.non_tensor["response_text"])  # tools at evaluation too
    assert worker.take_tool_spans() == [] and worker.sampler_trajectories() == []  # validation left nothing


def test_hf_engine_multi_turn_rollout(tool_calling_model_dir) -> None:
    worker, cfg = _worker(tool_calling_model_dir, "hf")
    _check_multi_turn(worker, cfg, tool_calling_model_dir)


def test_vllm_engine_multi_turn_rollout(tool_calling_model_dir) -> None:
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{(os.cpu_count() or 1) - 1}")
    worker, cfg = _worker(tool_calling_model_dir, "vllm")
    _check_multi_turn(worker, cfg, tool_calling_model_dir)
    del worker


def test_single_turn_rollout_has_no_agent_fields(tiny_model_dir) -> None:
    loaded = load_config(
        REPO_ROOT / "configs" / "tiny.yaml", [f"model.path={tiny_model_dir}", "rollout.engine=hf"], environ={}
    )
    c = OmegaConf.to_container(loaded.cfg, resolve=True)
    worker = RolloutWorker(RolloutSettings.from_sections(str(tiny_model_dir), c["rollout"], c["data"], 16, 4, 0,
                                                         tools=c["tools"]))  # fmt: skip
    assert worker.tool_client is None and worker.sampler is worker.engine
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    out = worker.generate(PromptSource.from_config(loaded.cfg.data, tok, 2).next_batch(), step=0)
    assert "tool_calls" not in out.batch and not any(k.startswith("agent/") for k in out.meta_info["metrics"])
    assert "tool_spans" not in out.meta_info
