"""User reward functions: ``reward.function: package.module:callable``.

Signature::

    def my_reward(data: DataProto, **function_kwargs) -> list[float] | list[dict]

``data`` holds one row per sampled response: ``data.non_tensor`` has ``response_text``, ``question``,
``ground_truth`` and ``uid`` (the prompt group); ``data.batch`` has ``responses`` [B, R] (token ids, padded),
``response_mask`` [B, R] (1 on real tokens) and ``response_length`` [B]. Return one float (the score) or
one dict with at least ``"score"`` (and optionally ``"acc"``) per row. ``function_kwargs`` come from
``reward.function_kwargs``.

Example (``my_rewards.py`` on the Python path, ``reward.function: my_rewards:brevity``)::

    def brevity(data, max_tokens=200):
        lengths = data.batch["response_length"]
        return [{"score": float(n <= max_tokens), "acc": 0.0} for n in lengths]

The driver loads the function and calls it on one example before any Ray actor starts
(:func:`check_reward_function`), so a wrong signature or result fails the run at once.
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
    return import_callable(spec, "reward.function")


def import_callable(spec: str, key: str) -> Callable[..., Any]:
    """The callable a ``package.module:callable`` config value names; RewardFunctionError naming ``key``, the value
    and what failed (no colon, an import error, no such callable)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise RewardFunctionError(f"{key}={spec!r}: expected 'package.module:callable'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RewardFunctionError(f"{key}={spec!r}: cannot import {module_name!r}: {exc}") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise RewardFunctionError(f"{key}={spec!r}: {module_name} has no callable {attr!r}")
    return fn


def _number(name: str, i: int, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise RewardFunctionError(
            f"reward function {name}: result {i} is {value!r}, not a number (return floats or dicts with 'score')"
        ) from None


def call_reward_function(fn: RewardFunction, data: DataProto, kwargs: dict[str, Any]) -> dict[str, np.ndarray]:
    """Run ``fn`` and check its result: ``{"scores": [B] float32, "acc": [B] float32}``."""
    results = fn(data, **kwargs)
    name = getattr(fn, "__qualname__", repr(fn))
    if not hasattr(results, "__len__") or isinstance(results, (str, bytes, dict)):
        raise RewardFunctionError(
            f"reward function {name} returned {type(results).__name__}; return a list with one float or dict per row"
        )
    if len(results) != len(data):
        raise RewardFunctionError(f"reward function {name} returned {len(results)} results for {len(data)} rows")
    scores, acc = np.zeros(len(data), np.float32), np.zeros(len(data), np.float32)
    for i, r in enumerate(results):
        if isinstance(r, dict):
            if "score" not in r:
                raise RewardFunctionError(f"reward function {name}: result {i} is a dict without 'score': {r}")
            scores[i], acc[i] = _number(name, i, r["score"]), _number(name, i, r.get("acc", r["score"]))
        else:
            scores[i] = acc[i] = _number(name, i, r)
    if not np.all(np.isfinite(scores)):
        raise RewardFunctionError(f"reward function {name} returned a non-finite score: {scores.tolist()}")
    return {"scores": scores, "acc": acc}


def example_response(ground_truth: str) -> str:
    """A correct, well-formed response, the text of the one-example check."""
    return f"The answer is {ground_truth}.\n#### {ground_truth}"


def example_batch(question: str, ground_truth: str, response_ids: list[int]) -> DataProto:
    """One row shaped like the reward role's input in function mode: :func:`example_response` as text and
    as ``response_ids`` (its tokens)."""
    ids = np.array([response_ids], np.int64)
    return DataProto.from_dict(
        batch={
            "responses": ids,
            "response_mask": np.ones_like(ids),
            "response_length": np.array([ids.shape[1]], np.int64),
        },
        non_tensor={
            "response_text": np.array([example_response(ground_truth)], dtype=object),
            "question": np.array([question], dtype=object),
            "ground_truth": np.array([ground_truth], dtype=object),
            "uid": np.array(["example-0"], dtype=object),
        },
    )


def check_reward_function(
    spec: str, kwargs: dict[str, Any], question: str, ground_truth: str, encode: Callable[[str], list[int]]
) -> float:
    """Load ``spec`` and call it on one example (:func:`example_batch`, tokenized with ``encode``); returns
    its score.

    Raises RewardFunctionError naming ``reward.function`` and what went wrong (import, a raised exception,
    a result of the wrong length or type, a non-finite score)."""
    fn = load_reward_function(spec)
    try:
        batch = example_batch(question, ground_truth, encode(example_response(ground_truth)))
        out = call_reward_function(fn, batch, kwargs)
    except RewardFunctionError as exc:
        raise RewardFunctionError(f"reward.function={spec!r} failed on one example: {exc}") from None
    except Exception as exc:  # the user's code: report it without a traceback into Relay
        raise RewardFunctionError(
            f"reward.function={spec!r} raised {type(exc).__name__}: {exc} when called on one example "
            f"(question={question[:60]!r}..., ground_truth={ground_truth!r}) with "
            f"reward.function_kwargs={kwargs}; see the signature in relay/scoring/user_function.py"
        ) from None
    return float(out["scores"][0])
