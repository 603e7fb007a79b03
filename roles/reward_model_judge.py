"""The reward_model role's ``judge`` kind: a causal LM, served by the rollout engine's code (vLLM, or transformers),
answers a rubric for each row (:mod:`relay.scoring.judge`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from relay.config.data_schema import DataConfig
from relay.config.schema import RolloutConfig
from relay.engines.base import SamplingSettings
from relay.metrics import outcomes as om
from relay.scoring.judge import (
    JudgeRubric,
    answer_token_ids,
    fill_rubric,
    judge_prompt_ids,
    number_scores,
    yes_probability,
)
from roles.reward_model_settings import RewardModelSettings


def judge_engine_sections(
    engine: str, device: str, max_length: int, max_new_tokens: int, micro_batch_size: int
) -> tuple[RolloutConfig, DataConfig]:
    """The rollout and data sections the judge's engine is built from (:func:`roles.rollout.build_engine`): one
    sample per prompt, prompts of at most ``max_length`` tokens, a KV cache sized for ``micro_batch_size`` of them."""
    rollout = RolloutConfig(
        engine=engine,
        batch_size=micro_batch_size,
        n=1,
        temperature=0.0,
        gpus_per_replica=1 if device == "gpu" else 0,
        kv_cache_gib="auto",
    )
    return rollout, DataConfig(max_prompt_length=max_length, max_response_length=max_new_tokens)


class JudgeScorer:
    """Scores rows with a generative judge; ``metrics`` of each call: the answers that did not parse."""

    def __init__(self, settings: RewardModelSettings) -> None:
        from transformers import AutoTokenizer

        from roles.rollout import build_engine

        if settings.judge is None:
            raise ValueError("reward_model.kind=judge needs its reward_model.judge section")
        rubric, path = settings.judge, settings.path
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.rubric, self.max_length, self.micro_batch_size = rubric, settings.max_length, settings.micro_batch_size
        self.answer_ids = answer_token_ids(self.tokenizer, rubric.yes, rubric.no)
        new_tokens = 1 if rubric.score == "yes_probability" else rubric.max_new_tokens
        rollout, data = judge_engine_sections(
            settings.engine, settings.device, settings.max_length, new_tokens, settings.micro_batch_size
        )
        eos = self.tokenizer.eos_token_id
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else eos
        self.engine = build_engine(
            path, rollout, data, [eos], pad, settings.seed, prompts_per_pass=settings.micro_batch_size
        )

    def prompts(
        self, questions: Sequence[str], responses: Sequence[str], references: Sequence[str]
    ) -> tuple[list[list[int]], int]:
        """Each row's judge prompt ids and how many lost their start to ``max_length``."""
        out, truncated = [], 0
        for q, r, ref in zip(questions, responses, references, strict=True):
            ids, cut = judge_prompt_ids(self.tokenizer, fill_rubric(self.rubric.rubric, q, r, ref), self.max_length)
            out.append(ids)
            truncated += cut
        return out, truncated

    def score(
        self, questions: Sequence[str], responses: Sequence[str], references: Sequence[str]
    ) -> tuple[np.ndarray, dict[str, float]]:
        prompts, truncated = self.prompts(questions, responses, references)
        metrics: dict[str, float] = {om.REWARD_MODEL_TRUNCATED: float(truncated)}
        if not prompts:
            return np.zeros(0, np.float32), {**metrics, om.REWARD_MODEL_JUDGE_PARSE_FAILURES: 0.0}
        if self.rubric.score == "yes_probability":
            yes, no = self.answer_ids
            sampling = SamplingSettings(n=1, max_new_tokens=1, temperature=0.0, allowed_token_ids=(yes, no))
            answers = self._generate(prompts, sampling)
            scores = [yes_probability(a.token_ids[0], a.log_probs[0], yes, no) for a in answers]
            return np.asarray(scores, np.float32), {**metrics, om.REWARD_MODEL_JUDGE_PARSE_FAILURES: 0.0}
        sampling = SamplingSettings(n=1, max_new_tokens=self.rubric.max_new_tokens, temperature=0.0)
        texts = [self._text(answer.token_ids) for answer in self._generate(prompts, sampling)]
        scores, failures = number_scores(texts, self.rubric)
        return np.asarray(scores, np.float32), {**metrics, om.REWARD_MODEL_JUDGE_PARSE_FAILURES: float(failures)}

    def _generate(self, prompts: list[list[int]], sampling: SamplingSettings) -> list[Any]:
        """One answer per prompt, ``micro_batch_size`` prompts per engine call (what the engine was sized for)."""
        size = self.micro_batch_size
        chunks = [prompts[i : i + size] for i in range(0, len(prompts), size)]
        return [group[0] for chunk in chunks for group in self.engine.generate(chunk, sampling)]

    def _text(self, token_ids: list[int]) -> str:
        return self.tokenizer.decode(token_ids, skip_special_tokens=True)


def judge_from_section(section: Any) -> JudgeRubric:
    """``reward_model.judge`` as a :class:`JudgeRubric`."""
    return JudgeRubric(
        rubric=str(section.rubric),
        score=str(section.score),
        yes=str(section.yes),
        no=str(section.no),
        number_max=float(section.number_max),
        max_new_tokens=int(section.max_new_tokens),
        parse_failure_score=float(section.parse_failure_score),
    )
