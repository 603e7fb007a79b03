"""Checks of ``rollout.agent`` and ``tools``: each problem names the key, the value and the fix.

The tool names are read from the registry (:data:`relay.tools.registry.TOOLS`) when a config is validated, so a
newly registered tool is valid config.
"""

from __future__ import annotations

from typing import Any

from relay.config.checks import at_least, positive


def check_agent(p: list[str], cfg: Any) -> None:
    """``rollout.agent`` and ``tools``."""
    from relay.tools.registry import TOOLS

    agent, tools = cfg.rollout.agent, cfg.tools
    at_least(p, "rollout.agent.max_turns", agent.max_turns, 1)
    at_least(p, "rollout.agent.result_max_tokens", agent.result_max_tokens, 1)
    unknown = [name for name in agent.tools if name not in TOOLS]
    if unknown:
        p.append(
            f"rollout.agent.tools={list(agent.tools)}: unknown tool(s) {', '.join(map(repr, unknown))}; registered: "
            f"{', '.join(sorted(TOOLS))} (a tool is a function and an entry in relay/tools/registry.py)"
        )
    if agent.enable and not agent.tools:
        p.append("rollout.agent.tools=[]: rollout.agent.enable=true needs at least one tool, e.g. [calculator]")
    if agent.enable and agent.max_turns < 2:
        p.append(
            f"rollout.agent.max_turns={agent.max_turns}: with rollout.agent.enable=true a call in the only turn is "
            "never answered; set rollout.agent.max_turns>=2 (or rollout.agent.enable=false)"
        )
    at_least(p, "tools.workers", tools.workers, 1)
    at_least(p, "tools.concurrency", tools.concurrency, 1)
    positive(p, "tools.timeout_s", tools.timeout_s)
    positive(p, "tools.cpu_seconds", tools.cpu_seconds)
    at_least(p, "tools.memory_mb", tools.memory_mb, 64)
    at_least(p, "tools.max_output_chars", tools.max_output_chars, 1)
    at_least(p, "tools.max_input_chars", tools.max_input_chars, 1)
