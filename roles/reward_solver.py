"""The solver inside the reward role (``reward.mode=solver``): a frozen model that answers each
question following the policy's guideline, all of a step's prompts in one engine call."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from relay.config.schema import RewardConfig
from relay.engines.base import Generation, SamplingSettings
from relay.metrics import outcomes as om
from relay.metrics import system as sm
from relay.scoring.solver_prompt import DEFAULT_SOLVER_TEMPLATE, fit_guideline, solver_messages


class CountingEngine:
    """Passes ``generate`` through to an engine and counts the calls (``reward/solver_engine_calls``)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.calls = 0

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingSettings) -> list[list[Generation]]:
        self.calls += 1
        return self.engine.generate(prompts, sampling)


def build_solver_engine(model_path: str, cfg: RewardConfig, eos: list[int], pad: int, seed: int) -> Any:
    """The engine ``reward.solver_engine`` names, sized for ``solver_max_prompt_length + solver_max_new_tokens``."""
    if cfg.solver_engine == "hf":
        import torch

        from relay.engines.hf_engine import HFRolloutEngine

        device = "cuda" if torch.cuda.is_available() else "cpu"
        return HFRolloutEngine(model_path, eos, pad, device=device, dtype=cfg.solver_dtype)
    from relay.engines.vllm_engine import VLLMRolloutEngine

    return VLLMRolloutEngine(
        model_path,
        eos,
        max_model_len=cfg.solver_max_prompt_length + cfg.solver_max_new_tokens,
        gpu_memory_utilization=cfg.solver_gpu_memory_utilization,
        kv_cache_gib=cfg.solver_kv_cache_gib,
        dtype=cfg.solver_dtype,
        seed=seed,
    )


class Solver:
    """Builds the solver prompts of a batch and samples ``solver_n`` answers for each in one engine call.

    The solver's weights are loaded once and never updated (it is not the policy)."""

    def __init__(self, model_path: str, cfg: RewardConfig, seed: int) -> None:
        from transformers import AutoTokenizer

        self.cfg = cfg
        self.seed = seed
        self.template = cfg.solver_prompt_template or DEFAULT_SOLVER_TEMPLATE
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        eos = self.tokenizer.eos_token_id
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else eos
        self.engine = CountingEngine(build_solver_engine(model_path, cfg, [eos], pad, seed))

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _decode(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(tokens, skip_special_tokens=True)

    def _prompt_ids(self, question: str, guideline: str) -> list[int]:
        rendered = self.tokenizer.apply_chat_template(
            solver_messages(question, guideline, self.template), add_generation_prompt=True, tokenize=False
        )
        return self._encode(rendered)

    def prompts(self, questions: Sequence[str], guidelines: Sequence[str]) -> tuple[list[list[int]], int, int]:
        """Token ids of each solver prompt; returns ``(prompts, guidelines_cut, prompts_cut)``.

        A guideline is cut to what fits ``solver_max_prompt_length`` after the question and template;
        a prompt still over the limit (a question that alone is too long) keeps its last tokens."""
        limit = self.cfg.solver_max_prompt_length
        out, guidelines_cut, prompts_cut = [], 0, 0
        for question, guideline in zip(questions, guidelines, strict=True):
            budget = limit - len(self._prompt_ids(question, ""))
            fitted, cut = fit_guideline(guideline, budget, self._encode, self._decode)
            ids = self._prompt_ids(question, fitted)
            for _ in range(3):  # re-tokenized in context, a cut guideline can come out a few tokens longer
                if len(ids) <= limit or budget <= 0:
                    break
                budget -= len(ids) - limit
                fitted, cut = fit_guideline(guideline, budget, self._encode, self._decode)
                ids = self._prompt_ids(question, fitted)
            guidelines_cut += cut
            if len(ids) > limit:
                ids, prompts_cut = ids[-limit:], prompts_cut + 1
            out.append(ids)
        return out, guidelines_cut, prompts_cut

    def answer(self, questions: Sequence[str], guidelines: Sequence[str], step: int) -> tuple[list[str], dict]:
        """``solver_n`` answers per (question, guideline), response-major (answers of row ``i`` are
        ``[i * n, (i + 1) * n)``), from one engine call; plus the solver's metrics."""
        cfg = self.cfg
        prompt_ids, guidelines_cut, prompts_cut = self.prompts(questions, guidelines)
        sampling = SamplingSettings(
            n=cfg.solver_n,
            max_new_tokens=cfg.solver_max_new_tokens,
            temperature=cfg.solver_temperature,
            top_p=cfg.solver_top_p,
            seed=self.seed * 1_000_003 + step,
        )
        calls_before = self.engine.calls
        start = time.perf_counter()
        generations = self.engine.generate(prompt_ids, sampling)
        seconds = time.perf_counter() - start
        flat = [g for group in generations for g in group]
        texts = self.tokenizer.batch_decode([g.token_ids for g in flat], skip_special_tokens=True)
        new_tokens = sum(len(g.token_ids) for g in flat)
        return texts, {
            sm.TIMING_SOLVER_GENERATE: seconds,
            sm.THROUGHPUT_SOLVER: new_tokens / max(seconds, 1e-9),
            om.REWARD_SOLVER_ENGINE_CALLS: float(self.engine.calls - calls_before),
            om.REWARD_SOLVER_RESPONSE_LENGTH: new_tokens / max(len(flat), 1),
            om.REWARD_SOLVER_TRUNCATED: sum(not g.finished for g in flat) / max(len(flat), 1),
            om.REWARD_SOLVER_GUIDELINES_CUT: float(guidelines_cut),
            om.REWARD_SOLVER_PROMPTS_CUT: float(prompts_cut),
            om.REWARD_SOLVER_PROMPT_TOKENS: sum(map(len, prompt_ids)) / max(len(prompt_ids), 1),
        }
