"""The schema of multi-turn tool use: ``rollout.agent`` (the loop) and ``tools`` (the role that runs the calls)."""

from __future__ import annotations

from dataclasses import dataclass, field

from relay.tools import ToolLimits

DEFAULT_LIMITS = ToolLimits()  # one place for the per-call limits' defaults


@dataclass
class ToolsRoleResources:
    # Ray logical CPUs reserved per tools actor (its calls are short; a python call's subprocess runs here too).
    cpus: float = 0.25
    threads: int = 1  # compute threads of the actor itself (the tools need none)
    memory_gib: float = 0.0  # Ray memory reserved per actor, GiB (0: none)
    cpu_affinity: list[int] = field(default_factory=list)  # cores the tools actors may run on (empty: any)


@dataclass
class AgentConfig:
    # Multi-turn tool use (relay/agent/loop.py): a response that writes <tool_call>name: argument</tool_call> stops
    # there, the call runs on the tools role, its result is appended (not trained on), and the model goes on.
    enable: bool = False
    max_turns: int = 3  # model turns per response (each but the last may end in a tool call)
    tools: list[str] = field(default_factory=lambda: ["calculator"])  # tools the model may call (relay/tools)
    result_max_tokens: int = 64  # tokens of one tool result appended at most


@dataclass
class ToolsConfig:
    # The tools role: a pool of actors running tool calls (started only with rollout.agent.enable).
    workers: int = 1  # actors in the pool; a turn's calls are split among them
    concurrency: int = 4  # calls one actor runs at once
    timeout_s: float = DEFAULT_LIMITS.timeout_s  # wall clock per call; over it the model reads a timeout error
    cpu_seconds: float = DEFAULT_LIMITS.cpu_seconds  # python: CPU seconds per call
    memory_mb: int = DEFAULT_LIMITS.memory_mb  # python: address space per call, MiB
    # characters of a tool's output the model reads (longer output is cut)
    max_output_chars: int = DEFAULT_LIMITS.max_output_chars
    max_input_chars: int = DEFAULT_LIMITS.max_input_chars  # a longer call is answered with an error
    resources: ToolsRoleResources = field(default_factory=ToolsRoleResources)
