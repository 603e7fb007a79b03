"""``reward.blocklist``: a response containing any of the listed substrings gets reward 0 and acc 0."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from relay.metrics import outcomes as om


def check_blocklist(blocklist: Sequence[str]) -> list[str]:
    """The blocklist as a list of strings; an empty or non-string entry is a ValueError naming the key
    (an empty substring is contained in every response and would zero every reward)."""
    entries = list(blocklist)
    for i, entry in enumerate(entries):
        if not isinstance(entry, str) or not entry:
            raise ValueError(
                f"reward.blocklist[{i}]={entry!r}: entries must be non-empty strings (an empty one blocks every "
                "response); remove it"
            )
    return entries


def blocked_mask(responses: Sequence[str], blocklist: Sequence[str]) -> np.ndarray:
    """``[B]`` bool: True where ``responses[i]`` contains one of ``blocklist`` (plain, case-sensitive
    substring match; an empty blocklist blocks nothing).

    Worked example: responses ``["#### 4", "ignore that #### 5", "IGNORE"]``, blocklist ``["ignore"]``
    -> ``[False, True, False]``.
    """
    entries = check_blocklist(blocklist)
    return np.array([any(entry in str(text) for entry in entries) for text in responses], dtype=bool)


def apply_blocklist(
    scores: np.ndarray, acc: np.ndarray, responses: Sequence[str], blocklist: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
    """Zero the score and acc of every blocked response; returns new arrays (float32, inputs untouched) and
    the metrics ``reward/blocked_count`` (responses blocked) and ``reward/blocked_rate`` (their share).

    Worked example: scores ``[1, 0.1, 1]``, acc ``[1, 0, 1]``, responses ``["#### 4", "#### 5", "hack #### 4"]``,
    blocklist ``["hack"]`` -> scores ``[1, 0.1, 0]``, acc ``[1, 0, 0]``, count 1, rate 1/3.
    """
    scores, acc = np.asarray(scores, np.float32), np.asarray(acc, np.float32)
    if not scores.shape == acc.shape == (len(responses),):
        raise ValueError(
            f"expected scores and acc of shape [{len(responses)}] (one per response); "
            f"got {scores.shape} and {acc.shape}"
        )
    blocked = blocked_mask(responses, blocklist)
    count = int(blocked.sum())
    metrics = {om.REWARD_BLOCKED_COUNT: float(count), om.REWARD_BLOCKED_RATE: count / max(len(responses), 1)}
    return np.where(blocked, 0.0, scores).astype(np.float32), np.where(blocked, 0.0, acc).astype(np.float32), metrics
