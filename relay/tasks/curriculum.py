"""A curriculum: a generated task's difficulty rises as the model masters each level.

``data.curriculum.levels`` lists the levels, easiest first, each a name and the generator options of that level
(for reasoning-gym its ``datasets``; they replace ``data.generate.options``). The run trains on one level at a
time, every level's rows drawn from the same seeds (``data.generate.seed``, ``test_seed``) as a run without a
curriculum. After each step the policy's training accuracy (``reward/accuracy``: every sampled response, strictly
graded) goes into a window of the last ``window`` steps at the level; when the window is full and its mean reaches
``promote_at`` the next level starts (and a fresh window); ``promote_at=0`` is a fixed schedule of ``window``
steps per level. A level is never left for an easier one.

Validation keeps one fixed split per level: each level's first ``data.generate.test_size`` validation rows, as a
subset named after the level, so ``val/<level>/accuracy_greedy`` of every level is comparable across the run. No
level trains on any level's validation problem (levels overlap: sums of two terms under 100 are in a level of terms
in 0..10 or 0..100 and in one of terms in 0..100 or 0..1000), so a harder level's held-out figures stay held out while
the easier levels train.

The state (the level, the window, and each level's data cursor) is part of the data cursor a checkpoint stores, so
a resumed run trains on the same prompts at the same levels as the uninterrupted one.

Worked example (``window=2``, ``promote_at=0.8``, two levels): accuracies 0.5, 0.9 -> mean 0.7, stay; 0.9 ->
window [0.9, 0.9], mean 0.9, promote to level 1; at the last level nothing changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from relay.metrics import outcomes as om


@dataclass
class Curriculum:
    """Which level a run trains on and when it rises (module docstring). ``levels`` are the level names."""

    levels: Sequence[str]
    promote_at: float
    window: int
    level: int = 0
    recent: list[float] = field(default_factory=list)

    def observe(self, accuracy: float) -> dict[str, float]:
        """One step's training accuracy at the current level, and the step's metrics: ``curriculum/level``
        (the level it trained on, 0 the easiest), ``curriculum/window_accuracy`` (the window's mean with this
        step) and ``curriculum/promoted`` (1 when the next level starts with the next step)."""
        trained = self.level
        self.recent = [*self.recent, float(accuracy)][-self.window :]
        mean = sum(self.recent) / len(self.recent)
        full = len(self.recent) == self.window
        promoted = full and mean >= self.promote_at and self.level + 1 < len(self.levels)
        if promoted:
            self.level += 1
            self.recent = []
        return {
            om.CURRICULUM_LEVEL: float(trained),
            om.CURRICULUM_WINDOW_ACCURACY: mean,
            om.CURRICULUM_PROMOTED: float(promoted),
        }

    @property
    def name(self) -> str:
        return self.levels[self.level]

    def state_dict(self) -> dict[str, Any]:
        return {"level": self.level, "recent": list(self.recent)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        level = int(state["level"])
        if not 0 <= level < len(self.levels):
            raise ValueError(f"curriculum level {level} in the checkpoint, but data.curriculum has {len(self.levels)}")
        self.level, self.recent = level, [float(a) for a in state["recent"]]


class CurriculumSource:
    """The prompts of a curriculum run: one :class:`relay.tasks.prompt_source.PromptSource` per level and the
    :class:`Curriculum` that picks one. It serves what a run's prompt source serves (``next_batch``, ``batcher``
    with the resumable state, ``epochs_done``, ``summary``), each batch from the current level, with the level's
    name as every row's ``subset``."""

    def __init__(self, curriculum: Curriculum, sources: Sequence[Any]) -> None:
        if len(sources) != len(curriculum.levels):
            raise ValueError(f"{len(curriculum.levels)} levels but {len(sources)} prompt sources")
        self.curriculum, self.sources = curriculum, list(sources)

    @classmethod
    def from_config(cls, data_cfg: Any, tokenizer: Any, batch_size: int) -> CurriculumSource:
        """Each level's training prompts (``data.curriculum.levels``) and a curriculum at level 0."""
        from relay.tasks.prompt_source import PromptSource

        c = data_cfg.curriculum
        levels = range(len(c.levels))
        sources = [PromptSource.from_config(level_data(data_cfg, i), tokenizer, batch_size) for i in levels]
        curriculum = Curriculum([str(level["name"]) for level in c.levels], float(c.promote_at), int(c.window))
        return cls(curriculum, sources)

    @property
    def current(self) -> Any:
        return self.sources[self.curriculum.level]

    def next_batch(self, size: int | None = None, sample_pass: int = 0) -> Any:
        """The current level's next prompts, each row's ``subset`` the level's name."""
        batch = self.current.next_batch(size, sample_pass)
        batch.non_tensor["subset"] = np.array([self.curriculum.name] * len(batch), dtype=object)
        return batch

    def observe(self, accuracy: float) -> dict[str, float]:
        """A step's training accuracy and the step's curriculum metrics (:meth:`Curriculum.observe`)."""
        return self.curriculum.observe(accuracy)

    def observe_graded(self, uids: Any, unsolved: Any) -> None:
        """A pass's grades into the current level's revisit queue (the level that served them: a curriculum runs
        on-policy, and the level changes only after a step)."""
        self.current.observe_graded(uids, unsolved)

    def revisit_metrics(self) -> dict[str, float]:
        return self.current.revisit_metrics()

    @property
    def batcher(self) -> CurriculumSource:
        """The resumable cursor (this object: :meth:`state_dict` / :meth:`load_state_dict`)."""
        return self

    def state_dict(self) -> dict[str, Any]:
        """The curriculum's state and each level's data cursor."""
        return {"curriculum": self.curriculum.state_dict(), "levels": [s.batcher.state_dict() for s in self.sources]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "curriculum" not in state or len(state["levels"]) != len(self.sources):
            raise ValueError(
                f"the checkpoint's data cursor is not a curriculum of {len(self.sources)} levels; resume with the "
                "run's own data.curriculum"
            )
        self.curriculum.load_state_dict(state["curriculum"])
        for source, cursor in zip(self.sources, state["levels"], strict=True):
            source.batcher.load_state_dict(cursor)

    @property
    def epochs_done(self) -> int:
        """Passes over the current level's prompts."""
        return self.current.epochs_done

    @property
    def mixed(self) -> bool:
        return self.current.mixed

    def summary(self) -> dict[str, Any]:
        """The ``data`` event's figures: each level's (:meth:`PromptSource.summary`), by level name."""
        return {"levels": {name: s.summary() for name, s in zip(self.curriculum.levels, self.sources, strict=True)}}


def level_data(data_cfg: Any, index: int) -> Any:
    """``data_cfg`` with ``data.generate.options`` replaced by level ``index``'s options (an OmegaConf node)."""
    from omegaconf import OmegaConf

    data = OmegaConf.to_container(data_cfg, resolve=True)
    data["generate"]["options"] = data["curriculum"]["levels"][index]["options"]
    return OmegaConf.create(data)


def curriculum_validation_prompts(data_cfg: Any, tokenizer: Any, limit: int | None) -> Any:
    """Every level's first ``limit`` validation problems (all with None), each row's ``subset`` its level's name:
    one fixed split per level, the same at every validation."""
    from relay.data_proto import DataProto
    from relay.tasks.prompt_source import validation_prompts

    parts = []
    for i, level in enumerate(data_cfg.curriculum.levels):
        part = validation_prompts(level_data(data_cfg, i), tokenizer, limit)
        name = str(level["name"])
        part.non_tensor["subset"] = np.array([name] * len(part), dtype=object)
        part.non_tensor["uid"] = np.array([f"{name}/{uid}" for uid in part.non_tensor["uid"]], dtype=object)
        parts.append(part)
    return DataProto.concat(parts)
