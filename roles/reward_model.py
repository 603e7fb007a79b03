"""The reward_model role: a model that scores each response, beside (or instead of) the reward role's grading.

``kind: classifier``: a transformers sequence-classification checkpoint with one label (torch, float32), each
(question, response) through its chat template, read at the last real token (:mod:`relay.scoring.reward_model`).
``kind: judge``: a causal LM answering ``reward_model.judge``'s rubric, served by the rollout engine's code
(:mod:`roles.reward_model_judge`).
Its scores are combined with the reward role's by ``reward.sources`` on the driver
(:mod:`relay.scoring.reward_sources`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from relay.data_proto import DataProto
from relay.faults import fault_point
from relay.metrics import outcomes as om
from relay.metrics import system as sm
from relay.process_identity import process_identity
from relay.run.logs import apply_role_log
from relay.startup import start_up_with_collector_paused
from roles.env import apply_cpu_affinity, apply_torch_threads, memory_metrics
from roles.reward_model_settings import RewardModelSettings


class ClassifierScorer:
    """Scores rows with a one-label sequence classifier."""

    def __init__(self, settings: RewardModelSettings, device: str) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.settings = settings
        self.tokenizer = AutoTokenizer.from_pretrained(settings.path)
        model = AutoModelForSequenceClassification.from_pretrained(settings.path, dtype=torch.float32)
        self.model = model.to(device).eval()

    def score(
        self, questions: Sequence[str], responses: Sequence[str], references: Sequence[str]
    ) -> tuple[np.ndarray, dict[str, float]]:
        from relay.scoring.reward_model import classifier_batch, classifier_scores

        batch = classifier_batch(self.tokenizer, questions, responses, self.settings.max_length)
        scores = classifier_scores(self.model, batch, self.settings.micro_batch_size)
        return scores, {om.REWARD_MODEL_TRUNCATED: float(batch.truncated)}


def build_scorer(settings: RewardModelSettings, device: str) -> Any:
    """The scorer ``settings.kind`` names."""
    if settings.kind == "classifier":
        return ClassifierScorer(settings, device)
    if settings.kind == "judge":
        from roles.reward_model_judge import JudgeScorer

        return JudgeScorer(settings)
    raise ValueError(f"reward_model.kind={settings.kind!r}: not classifier or judge")


class RewardModelWorker:
    """Scores rows with the model at ``settings.path``."""

    @start_up_with_collector_paused
    def __init__(self, settings: RewardModelSettings) -> None:
        apply_role_log()  # library output to outputs/<run>/logs/<actor>.log (relay.run.logs)
        apply_cpu_affinity()
        self.threads = apply_torch_threads(settings.threads)
        self.settings = settings
        self.scorer = build_scorer(settings, "cuda" if settings.device == "gpu" else "cpu")

    def ready(self) -> dict:
        return {"role": "reward_model", "kind": self.settings.kind, "threads": self.threads, **process_identity()}

    def score(self, data: DataProto, step: int) -> DataProto:
        """``rm_scores`` [B] for the rows' ``question``, ``response_text`` (and ``ground_truth``, a judge's
        ``{reference}``); metrics: the scores' mean and std, the conversations cut to ``max_length``, a judge's
        parse failures, ``timing/reward_model_compute``."""
        fault_point("reward_model.score", step)
        start = time.perf_counter()
        questions = [str(q) for q in data.non_tensor["question"]]
        responses = [str(r) for r in data.non_tensor["response_text"]]
        truths = data.non_tensor.get("ground_truth")
        references = [str(t) for t in truths] if truths is not None else [""] * len(responses)
        scores, scored = self.scorer.score(questions, responses, references)
        metrics = {
            om.REWARD_MODEL_SCORE_MEAN: float(scores.mean()) if len(scores) else 0.0,
            om.REWARD_MODEL_SCORE_STD: float(scores.std()) if len(scores) else 0.0,
            **scored,
            sm.TIMING_ROLE_COMPUTE.format(role="reward_model"): time.perf_counter() - start,
            **memory_metrics("reward_model"),
        }
        return DataProto.from_dict(batch={"rm_scores": scores.astype(np.float32)}, meta_info={"metrics": metrics})
