"""A toy reward that a policy can learn quickly, for end-to-end learning tests."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from relay.data_proto import DataProto


def token_share(response_ids: np.ndarray, response_mask: np.ndarray, *, target_ids: Iterable[int]) -> float:
    """Share of real (mask != 0) response tokens whose id is in ``target_ids``; 0.0 if none are real."""
    response_ids = np.asarray(response_ids)
    response_mask = np.asarray(response_mask)
    if response_ids.ndim != 1 or response_ids.shape != response_mask.shape:
        raise ValueError(
            f"response_ids and response_mask must be 1-D of equal length, "
            f"got shapes {response_ids.shape} and {response_mask.shape}"
        )
    real = response_ids[response_mask.astype(bool)]
    if real.size == 0:
        return 0.0
    return float(np.isin(real, np.fromiter(target_ids, dtype=np.int64)).mean())


def token_share_reward(data: DataProto, *, target_start: int = 0, target_stop: int) -> list[float]:
    """Batch form of :func:`token_share` for ``reward.function`` (ids in ``[target_start, target_stop)``)."""
    targets = range(target_start, target_stop)
    responses, masks = data.batch["responses"], data.batch["response_mask"]
    return [token_share(r, m, target_ids=targets) for r, m in zip(responses, masks, strict=True)]


# Config overrides selecting the toy reward used by the learning tests and benchmarks: the share of response tokens
# with an id below 4096 (~0.08 under the tiny random model's near-uniform distribution, 1.0 at best).
TOY_REWARD_OVERRIDES = (
    "reward.mode=function",
    "reward.function=benchmarks.harness.toy_reward:token_share_reward",
    "reward.function_kwargs={target_stop: 4096}",
)
