"""One role's metrics from its ranks (rollout replicas, actor_ref GPUs, learner hosts) merged into one set."""

from __future__ import annotations

from relay.metrics import system as sm


def merge_rank_metrics(per_rank: list[dict[str, float]]) -> dict[str, float]:
    """One role's metrics from its ranks, which work at the same time on shares of the batch.

    ``throughput/*`` and ``memory/*`` add up (ranks run side by side); ``timing/*`` and ``*_max`` take
    the slowest/largest; ``rollout/new_tokens``-style counts add up; anything else is the mean.
    Example: ranks with 100 and 80 tokens/s in 2 s and 3 s give 180 tokens/s and 3 s.
    """
    if len(per_rank) == 1:
        return dict(per_rank[0])
    out: dict[str, float] = {}
    for key in dict.fromkeys(k for m in per_rank for k in m):
        values = [m[key] for m in per_rank if key in m]
        if key.startswith((sm.THROUGHPUT_PREFIX, sm.MEMORY_PREFIX)) or key.endswith(("_count", "/new_tokens")):
            out[key] = float(sum(values))
        elif key.startswith(sm.TIMING_PREFIX) or key.endswith("_max"):
            out[key] = float(max(values))
        else:
            out[key] = float(sum(values) / len(values))
    return out
