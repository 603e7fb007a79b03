"""A rollout engine whose responses are multi-turn: :func:`relay.agent.loop.run_agent_loop` behind ``generate``.

It answers the engine interface (:class:`relay.engines.base.RolloutEngine`), so training rollouts and validation
(:mod:`relay.evaluation.generation`) run the agent loop without knowing it; the trajectories it built are kept
for the step's ``agent/*`` figures until :meth:`AgentEngine.take_trajectories`.
"""

from __future__ import annotations

from collections.abc import Sequence

from relay.agent.loop import AgentSettings, Generate, Tokenizer, ToolRunner, run_agent_loop
from relay.agent.trajectory import Trajectory
from relay.engines.base import Generation, SamplingSettings


class AgentEngine:
    def __init__(self, generate: Generate, tokenizer: Tokenizer, run_tools: ToolRunner, settings: AgentSettings):
        self._generate = generate
        self.tokenizer = tokenizer
        self.run_tools = run_tools
        self.settings = settings
        self.trajectories: list[Trajectory] = []

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingSettings) -> list[list[Generation]]:
        """``result[i][j]``: the ``j``-th multi-turn response to ``prompts[i]`` (tool tokens with loss mask 0)."""
        groups = run_agent_loop(self._generate, prompts, sampling, self.tokenizer, self.run_tools, self.settings)
        self.trajectories += [t for group in groups for t in group]
        return [[t.generation() for t in group] for group in groups]

    def take_trajectories(self) -> list[Trajectory]:
        """The trajectories generated since the last call, in generation order."""
        out, self.trajectories = self.trajectories, []
        return out
