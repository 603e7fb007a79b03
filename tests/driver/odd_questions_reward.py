"""The dynamic-sampling tests' reward: the toy reward on about half of a step's prompts, 0.0 on the rest."""

from __future__ import annotations

from benchmarks.harness.toy_reward import token_share_reward
from relay.data_proto import DataProto


def token_share_on_odd_questions(data: DataProto, *, target_start: int = 0, target_stop: int) -> list[float]:
    """:func:`benchmarks.harness.toy_reward.token_share_reward` for prompts whose question has an odd number of
    characters, 0.0 for the others: about half of a step's groups then score the same on every sample (no reward
    variance), the case dynamic sampling (``algorithm.filter_groups``) is for."""
    shares = token_share_reward(data, target_start=target_start, target_stop=target_stop)
    return [s if len(q) % 2 else 0.0 for s, q in zip(shares, data.non_tensor["question"], strict=True)]
