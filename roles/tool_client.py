"""How a rollout replica reaches the tools role: a turn's calls split among the pool's actors by name (the names of
:func:`placement.plan.actor_name`, the shares of :func:`relay.rollout_batch.split_rows`, the waiting and the
failures of :func:`roles.role_call.call`, as the driver's calls into every role).

The actors are looked up by name (``tools-0``, ``tools-1``, ... in the run's namespace) on first use, so a
restarted rollout replica finds them again, and a restarted tools actor keeps its name. Without Ray (a rollout
worker built in-process: the evaluation CLI, tests) the calls run on a :class:`roles.tools.ToolsWorker` in this
process instead (:class:`LocalToolClient`).
"""

from __future__ import annotations

import time

import ray

from placement.plan import actor_name
from relay.config.agent_schema import ToolsConfig
from relay.rollout_batch import split_rows
from roles.role_call import call

# What a tools actor's answer may take beyond its calls' own time limits (Ray's scheduling, the results' transfer).
ANSWER_SLACK_S = 30.0
# What a hung tools actor's message names as the bound it overran.
TOOLS_BOUND = "the calls' time limits (tools.timeout_s per round of tools.concurrency calls, + 30 s)"


def answer_bound_s(calls: int, timeout_s: float, concurrency: int) -> float:
    """The longest a tools actor may take to answer ``calls`` calls run ``concurrency`` at a time, each cut at
    ``timeout_s``: past it the actor is hung, not busy.

    >>> answer_bound_s(5, 5.0, 2)  # three rounds of 5 s, and the slack
    45.0
    """
    rounds = -(-calls // max(concurrency, 1))
    return rounds * timeout_s + ANSWER_SLACK_S


class ToolClient:
    """``client(calls)`` runs ``[(name, argument), ...]`` on the pool and returns each call's result dict;
    ``spans`` collects the wall-clock ``(start, end)`` of each batch (the timeline's tools track)."""

    def __init__(self, workers: int, namespace: str | None, timeout_s: float = 5.0, concurrency: int = 1) -> None:
        self.names = [actor_name("tools", rank) for rank in range(workers)]
        self.namespace = namespace
        self.timeout_s, self.concurrency = timeout_s, concurrency
        self._handles: list | None = None
        self.spans: list[tuple[float, float]] = []

    def handles(self) -> list:
        if self._handles is None:
            self._handles = [ray.get_actor(name, namespace=self.namespace) for name in self.names]
        return self._handles

    def __call__(self, calls: list[tuple[str, str]]) -> list[dict]:
        """Each call's result, in order. A tools actor that dies, or gives no answer within its share's time limits
        (:func:`answer_bound_s`), raises :class:`roles.role_call.RoleFailedError` naming it: the rollout's call fails
        with it, and the driver restarts that tools actor and sends the rollout's call again."""
        start = time.time()
        shares = split_rows(len(calls), len(self.names))
        refs = [h.call.remote(calls[rows]) for h, rows in zip(self.handles(), shares, strict=False)]
        longest = max((rows.stop - rows.start for rows in shares), default=0)
        bound = answer_bound_s(longest, self.timeout_s, self.concurrency)
        answers = call(self.names[: len(refs)], refs, "tool calls", bound, TOOLS_BOUND)
        self.spans.append((start, time.time()))
        return [result for answer in answers for result in answer]


class LocalToolClient:
    """The tools run in this process, on one :class:`roles.tools.ToolsWorker`; ``spans`` as :class:`ToolClient`'s."""

    def __init__(self, tools: ToolsConfig, names: list[str]) -> None:
        from dataclasses import asdict

        from roles.tools import ToolsSettings, ToolsWorker

        self.worker = ToolsWorker(ToolsSettings.from_section(asdict(tools), names))
        self.spans: list[tuple[float, float]] = []

    def __call__(self, calls: list[tuple[str, str]]) -> list[dict]:
        start = time.time()
        out = self.worker.call(calls)
        self.spans.append((start, time.time()))
        return out


def tool_client(tools: ToolsConfig, names: list[str], namespace: str | None) -> ToolClient | LocalToolClient:
    """The pool of a Ray run (``namespace``: the run's), or in-process tools (``namespace`` None)."""
    if namespace is not None:
        return ToolClient(int(tools.workers), namespace, float(tools.timeout_s), int(tools.concurrency))
    return LocalToolClient(tools, list(names))
