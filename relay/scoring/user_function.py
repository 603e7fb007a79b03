"""User reward functions: ``reward.function: package.module:callable``.

Signature::

    def my_reward(data: DataProto, **function_kwargs) -> list[float] | list[dict]

``data`` is the rollout batch (``responses``, ``response_mask``, ``response_text``,
``question``, ``ground_truth``, …), one row per sampled response. Return one float (the
score) or one dict with at least ``"score"`` (and optionally ``"acc"``) per row.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np

from relay.data_proto import DataProto

RewardFunction = Callable[..., list[Any]]


class RewardFunctionError(ValueError):
    pass


def load_reward_function(spec: str) -> RewardFunction:
    """Import ``package.module:callable``; errors name the spec and what failed."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise RewardFunctionError(f"reward.function={spec!r}: expected 'package.module:callable'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RewardFunctionError(f"reward.function={spec!r}: cannot import {module_name!r}: {exc}") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise RewardFunctionError(f"reward.function={spec!r}: {module_name} has no callable {attr!r}")
    return fn


def call_reward_function(fn: RewardFunction, data: DataProto, kwargs: dict[str, Any]) -> dict[str, np.ndarray]:
    """Run ``fn`` and check its result: ``{"scores": [B] float32, "acc": [B] float32}``."""
    results = fn(data, **kwargs)
    name = getattr(fn, "__qualname__", repr(fn))
    if len(results) != len(data):
        raise RewardFunctionError(f"reward function {name} returned {len(results)} results for {len(data)} rows")
    scores, acc = np.zeros(len(data), np.float32), np.zeros(len(data), np.float32)
    for i, r in enumerate(results):
        if isinstance(r, dict):
            if "score" not in r:
                raise RewardFunctionError(f"reward function {name}: result {i} is a dict without 'score': {r}")
            scores[i], acc[i] = float(r["score"]), float(r.get("acc", r["score"]))
        else:
            scores[i] = acc[i] = float(r)
    if not np.all(np.isfinite(scores)):
        raise RewardFunctionError(f"reward function {name} returned a non-finite score: {scores.tolist()}")
    return {"scores": scores, "acc": acc}
