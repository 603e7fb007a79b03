"""The tools role: runs the tool calls of multi-turn rollouts (``relay.tools``) for a pool of actors.

Each worker serves the tools named in its config and runs up to ``concurrency`` calls at once on a thread
pool: the calculator is pure Python and quick, and each Python call is a child process that the thread
only waits on, so threads suffice and the calls of a batch overlap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from relay.faults import fault_point
from relay.process_identity import process_identity
from relay.run.logs import apply_role_log
from relay.tools.python_sandbox import sandbox_protections
from relay.tools.registry import TOOLS, Tool, ToolCall, ToolLimits, ToolResult, check_tool_names, run_tool
from roles.env import apply_cpu_affinity

LIMIT_KEYS = ("timeout_s", "cpu_seconds", "memory_mb", "max_output_chars", "max_input_chars")


@dataclass(frozen=True)
class ToolsSettings:
    """What a tools worker is built with: ``names`` (the tools it serves), each call's ``limits`` and
    ``concurrency`` (calls run at once).

    >>> ToolsSettings.from_section({"timeout_s": 2.0, "concurrency": 4, "workers": 1}, ["calculator"]).limits.timeout_s
    2.0
    """

    names: tuple[str, ...]
    limits: ToolLimits = field(default_factory=ToolLimits)
    concurrency: int = 1

    @classmethod
    def from_section(cls, section: Mapping[str, Any], names: Iterable[str]) -> ToolsSettings:
        """From the ``tools`` section (the ``ToolLimits`` fields: ``timeout_s``, ``cpu_seconds``, ``memory_mb``,
        ``max_output_chars``, ``max_input_chars``, a missing one the default; ``concurrency``, default 1) and the
        tool names ``rollout.agent.tools`` allows; the section's other keys (``workers``) are the driver's."""
        limits = ToolLimits(**{key: section[key] for key in LIMIT_KEYS if key in section})
        return cls(tuple(str(n) for n in names), limits, int(section.get("concurrency", 1)))


class ToolsWorker:
    """Serves ``settings.names`` under ``settings.limits``, ``settings.concurrency`` calls at once.

    ``tools`` replaces the registry (tests use it); ``names`` must still name its entries."""

    def __init__(self, settings: ToolsSettings, tools: Mapping[str, Tool] | None = None) -> None:
        self.calls = 0  # call() batches answered by this process
        apply_role_log()  # library output to outputs/<run>/logs/<actor>.log (relay.run.logs)
        apply_cpu_affinity()  # before the pool's threads and the tools' child processes: they inherit it
        registry = TOOLS if tools is None else tools
        names = list(settings.names)
        if not names:
            raise ValueError("tools.names is empty: a tools worker must serve at least one tool")
        check_tool_names(names, registry)
        concurrency = settings.concurrency
        if concurrency < 1:
            raise ValueError(f"tools.concurrency must be at least 1, got {concurrency}")
        self.names = names
        self.tools = {name: registry[name] for name in names}
        self.limits = settings.limits
        self.concurrency = concurrency
        self.pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="tool-call")

    def ready(self) -> dict:
        """Who answered: role, pid, Ray node id (None outside Ray), the tools served, and for ``python`` the
        sandbox protections active on this node."""
        info: dict[str, Any] = {"role": "tools", "tools": list(self.names), **process_identity()}
        if "python" in self.tools:
            info["sandbox"] = sandbox_protections()
        return info

    def _one(self, name_argument: tuple[str, str]) -> ToolResult:
        name, argument = name_argument
        return run_tool(ToolCall(name=name, argument=argument), self.limits, self.tools)

    def call(self, calls: list[tuple[str, str]]) -> list[dict]:
        """``{"text", "status", "seconds"}`` for each ``(name, argument)``, in order; up to ``concurrency`` run
        at once. A name this worker does not serve gets an error result listing the ones it does. Its fault point's
        step is the call's ordinal in this process (the tools role sees no training step)."""
        fault_point("tools.call", self.calls)
        self.calls += 1
        results = self.pool.map(self._one, [(str(name), str(argument)) for name, argument in calls])
        return [{"text": r.text, "status": r.status, "seconds": r.seconds} for r in results]

    def close(self) -> None:
        """Wait for the calls under way and stop the thread pool."""
        self.pool.shutdown(wait=True)
