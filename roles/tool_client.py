"""How a rollout replica reaches the tools role: a turn's calls split among the pool's actors, by name.

The actors are looked up by name (``tools-0``, ``tools-1``, ... in the run's namespace) on first use, so a
restarted rollout replica finds them again, and a restarted tools actor keeps its name. Without Ray (a rollout
worker built in-process: the evaluation CLI, tests) the calls run on a :class:`roles.tools.ToolsWorker` in this
process instead (:class:`LocalToolClient`).
"""

from __future__ import annotations

import time

import ray

from relay.rollout_batch import split_rows


class ToolsActorDied(RuntimeError):
    """A tools actor died during a turn's calls. ``actor`` names it; the driver waits for Ray to restart it and
    sends the rollout's call again (:mod:`driver.role_group`)."""

    def __init__(self, actor: str, message: str) -> None:
        super().__init__(actor, message)
        self.actor = actor

    def __str__(self) -> str:
        return f"tools actor '{self.actor}' died during tool calls: {self.args[1]}"


class ToolClient:
    """``client(calls)`` runs ``[(name, argument), ...]`` on the pool and returns each call's result dict;
    ``spans`` collects the wall-clock ``(start, end)`` of each batch (the timeline's tools track)."""

    def __init__(self, workers: int, namespace: str | None) -> None:
        self.names = [f"tools-{i}" for i in range(workers)]
        self.namespace = namespace
        self._handles: list | None = None
        self.spans: list[tuple[float, float]] = []

    def handles(self) -> list:
        if self._handles is None:
            self._handles = [ray.get_actor(name, namespace=self.namespace) for name in self.names]
        return self._handles

    def __call__(self, calls: list[tuple[str, str]]) -> list[dict]:
        start = time.time()
        parts = split_rows(len(calls), len(self.names))
        pool = zip(self.names, self.handles(), strict=True)
        refs = [(name, h.call.remote(calls[rows])) for (name, h), rows in zip(pool, parts, strict=False)]
        out: list[dict] = []
        for name, ref in refs:
            try:
                out += ray.get(ref)
            except ray.exceptions.RayActorError as exc:
                raise ToolsActorDied(name, str(exc).strip().splitlines()[0] if str(exc).strip() else "") from None
        self.spans.append((start, time.time()))
        return out


class LocalToolClient:
    """The tools run in this process, on one :class:`roles.tools.ToolsWorker`; ``spans`` as :class:`ToolClient`'s."""

    def __init__(self, tools_cfg: dict) -> None:
        from roles.tools import ToolsWorker

        self.worker = ToolsWorker(tools_cfg)
        self.spans: list[tuple[float, float]] = []

    def __call__(self, calls: list[tuple[str, str]]) -> list[dict]:
        start = time.time()
        out = self.worker.call(calls)
        self.spans.append((start, time.time()))
        return out


def tool_client(tools_cfg: dict, names: list[str], namespace: str | None) -> ToolClient | LocalToolClient:
    """The pool of a Ray run (``namespace``: the run's), or in-process tools (``namespace`` None)."""
    if namespace is not None:
        return ToolClient(int(tools_cfg["workers"]), namespace)
    return LocalToolClient({**tools_cfg, "names": list(names)})
