"""What a reward_model actor is built with, apart from the actor and its scorers, which both read it."""

from __future__ import annotations

from dataclasses import dataclass

from relay.scoring.judge import JudgeRubric


@dataclass(frozen=True)
class RewardModelSettings:
    """What a reward_model actor is built with (the ``reward_model`` section: :func:`driver.role_settings.
    reward_model_settings`)."""

    path: str
    kind: str = "classifier"
    micro_batch_size: int = 8
    max_length: int = 1024
    threads: int = 0
    device: str = "cpu"
    engine: str = "vllm"  # judge: the engine serving it
    judge: JudgeRubric | None = None  # judge: its rubric and scoring
    seed: int = 0
