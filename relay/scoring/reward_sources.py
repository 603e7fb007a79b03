"""``reward.sources``: the score a response is trained on, from the reward role's grade and the reward model's
score, each normalised, clipped and weighted, then summed (pure numpy, on the driver).

A source is ``reward`` (the reward role's ``scores``: rule grading, a solver, or a user function) or
``reward_model`` (the reward_model role's ``rm_scores``). ``normalize: batch`` turns a source into z-scores over the
step's batch (its std 0: all zeros), so a classifier's arbitrary scale does not swamp a 0/1 grade; ``clip`` bounds it
after that.

Worked example: grades ``[1, 0, 1, 0]`` (weight 1) and model scores ``[3, 1, 2, 2]`` (weight 0.5, normalised: mean 2,
std 0.7071 -> ``[1.414, -1.414, 0, 0]``) -> ``[1.707, -0.707, 1, 0]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

SOURCES = ("reward", "reward_model")
NORMALIZATIONS = ("none", "batch")
# The batch field each source's scores arrive in.
SOURCE_FIELDS = {"reward": "scores", "reward_model": "rm_scores"}


@dataclass(frozen=True)
class RewardSource:
    """One entry of ``reward.sources``."""

    source: str = "reward"
    weight: float = 1.0
    normalize: str = "none"
    clip: tuple[float, float] | None = None

    @classmethod
    def from_config(cls, entry: Mapping[str, Any]) -> RewardSource:
        clip = entry.get("clip")
        bounds = None if clip is None else (float(clip[0]), float(clip[1]))
        return cls(str(entry["source"]), float(entry["weight"]), str(entry["normalize"]), bounds)

    @property
    def is_identity(self) -> bool:
        """Whether this source, alone, leaves its scores as they are."""
        return self.weight == 1.0 and self.normalize == "none" and self.clip is None


def transformed(scores: np.ndarray, source: RewardSource) -> np.ndarray:
    """``scores`` normalised and clipped as ``source`` says (not yet weighted).

    >>> transformed(np.array([3.0, 1.0, 2.0, 2.0]), RewardSource("reward_model", 0.5, "batch")).round(3).tolist()
    [1.414, -1.414, 0.0, 0.0]
    """
    out = np.asarray(scores, np.float64)
    if source.normalize == "batch":
        std = out.std()
        out = (out - out.mean()) / std if std > 0 else np.zeros_like(out)
    if source.clip is not None:
        out = np.clip(out, *source.clip)
    return out


def combine(columns: Mapping[str, np.ndarray], sources: Sequence[RewardSource]) -> tuple[np.ndarray, dict[str, float]]:
    """The weighted sum of ``sources`` over ``columns`` (each source's scores, by source name) and each source's mean
    after its transform (``reward/source_<name>_mean``). One identity source (the default: the reward role's grade
    alone) returns its column unchanged and no metric, so a run without ``reward.sources`` records what it did.

    >>> scores, _ = combine({"reward": np.array([1.0, 0, 1, 0]), "reward_model": np.array([3.0, 1, 2, 2])},
    ...                     [RewardSource(), RewardSource("reward_model", 0.5, "batch")])
    >>> [round(float(x), 3) for x in scores]
    [1.707, -0.707, 1.0, 0.0]
    """
    from relay.metrics import outcomes as om

    if len(sources) == 1 and sources[0].is_identity:
        return columns[sources[0].source], {}
    total, metrics = None, {}
    for source in sources:
        part = transformed(columns[source.source], source)
        metrics[om.REWARD_SOURCE_MEAN.format(source=source.source)] = float(part.mean()) if len(part) else 0.0
        total = source.weight * part if total is None else total + source.weight * part
    return np.asarray(total, np.float32), metrics


def sources_problems(entries: Sequence[Mapping[str, Any]], reward_model_enabled: bool) -> list[str]:
    """What is wrong with ``reward.sources``, each naming the key, the value and the fix."""
    p: list[str] = []
    if not entries:
        p.append("reward.sources is empty: name at least one source, e.g. [{source: reward, weight: 1.0}]")
    names = [str(e.get("source")) for e in entries]
    for i, entry in enumerate(entries):
        key = f"reward.sources[{i}]"
        if names[i] not in SOURCES:
            p.append(f"{key}.source={names[i]!r}: unknown; the sources are {', '.join(SOURCES)}")
        if str(entry.get("normalize")) not in NORMALIZATIONS:
            p.append(f"{key}.normalize={entry.get('normalize')!r}: one of {', '.join(NORMALIZATIONS)}")
        clip = entry.get("clip")
        if clip is not None and (len(clip) != 2 or not float(clip[0]) < float(clip[1])):
            p.append(f"{key}.clip={list(clip)}: two bounds [low, high] with low < high, or null")
    if len(set(names)) < len(names):
        p.append(f"reward.sources names a source twice ({names}); give each source one entry")
    if entries and not any(float(e.get("weight", 0.0)) != 0.0 for e in entries):
        weights = [float(e.get("weight", 0.0)) for e in entries]
        p.append(f"reward.sources weights are {weights}: they sum to nothing; give at least one a nonzero weight")
    if "reward_model" in names and not reward_model_enabled:
        p.append("reward.sources names reward_model, but reward_model.enable is false; enable it or drop the entry")
    if reward_model_enabled and "reward_model" not in names:
        p.append(
            "reward_model.enable=true, but reward.sources does not name it, so its scores would train nothing; add "
            "{source: reward_model, weight: 1.0} to reward.sources"
        )
    return p
