"""What a step's multi-turn rollouts did: turns, tool calls, errors, timeouts, latency, tool tokens.

Counts end in ``_count`` (replicas' counts add up, :func:`relay.rank_metrics.merge_rank_metrics`); the latency
percentiles of several replicas are averaged (each replica's are exact).
"""

from __future__ import annotations

import numpy as np

from relay.agent.trajectory import TURN_LIMIT, Trajectory
from relay.metrics import outcomes as om


def agent_metrics(trajectories: list[Trajectory]) -> dict[str, float]:
    """The step's ``agent/*`` figures.

    Example: two responses, one with 2 turns and a 0.1 s calculator call, one answering in 1 turn:
    ``agent/turns_mean`` 1.5, ``agent/tool_calls_count`` 1, ``agent/tool_calls_per_response`` 0.5,
    ``agent/tool_latency_p50_s`` 0.1.
    """
    if not trajectories:
        return {}
    seconds = np.array([s for t in trajectories for s in t.tool_seconds], np.float64)
    return {
        om.AGENT_TURNS_MEAN: float(np.mean([t.turns for t in trajectories])),
        om.AGENT_TOOL_CALLS: float(sum(t.tool_calls for t in trajectories)),
        om.AGENT_TOOL_CALLS_PER_RESPONSE: float(np.mean([t.tool_calls for t in trajectories])),
        om.AGENT_TOOL_ERRORS: float(sum(t.tool_errors for t in trajectories)),
        om.AGENT_TOOL_TIMEOUTS: float(sum(t.tool_timeouts for t in trajectories)),
        om.AGENT_TOOL_LATENCY_P50: float(np.percentile(seconds, 50)) if seconds.size else 0.0,
        om.AGENT_TOOL_LATENCY_P95: float(np.percentile(seconds, 95)) if seconds.size else 0.0,
        om.AGENT_TOOL_TOKENS_MEAN: float(np.mean([t.tool_tokens for t in trajectories])),
        om.AGENT_TURN_LIMIT_FRAC: float(np.mean([t.ended == TURN_LIMIT for t in trajectories])),
    }


def row_arrays(trajectories: list[Trajectory]) -> dict[str, np.ndarray]:
    """Per response, for the driver's figures after grading: ``turns``, ``tool_calls`` and ``tool_tokens`` [B]."""
    return {
        "turns": np.array([t.turns for t in trajectories], np.int32),
        "tool_calls": np.array([t.tool_calls for t in trajectories], np.int32),
        "tool_tokens": np.array([t.tool_tokens for t in trajectories], np.int32),
    }


def correct_with_tool_share(acc: np.ndarray, tool_calls: np.ndarray) -> float:
    """The share of correct responses (``acc`` > 0) that called a tool; 0 when none is correct.

    Example: ``acc = [1, 1, 0, 1]``, ``tool_calls = [2, 0, 1, 1]`` -> 2 of 3 correct ones called: 0.667."""
    correct = np.asarray(acc) > 0
    return float((np.asarray(tool_calls)[correct] > 0).mean()) if correct.any() else 0.0
