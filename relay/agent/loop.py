"""The agent loop: every live trajectory of a step advances one model turn per engine call, tools run between.

Turn 0 samples ``n`` responses per prompt, each stopping at a tool call's closing tag (:data:`CALL_CLOSE`) or
EOS. Every response that ended in a call has the call parsed and run (all of a turn's calls in one
``run_tools`` batch), and the result's tokens appended with loss mask 0; then all of them continue together in
one engine call of one sample each, their prompts the conversation so far as token ids (the engine's prefix
cache holds what earlier turns computed). This repeats until no trajectory is live or ``max_turns`` model turns
were taken. Model and tool tokens together stay within ``max_response_length``.

A malformed call or an unknown tool is a tool error: the model reads ``error: ...`` and goes on.

Turn ``t`` samples with seed ``seed + TURN_SEED_STRIDE * t``: a step's trajectories are a pure function of its
seed, its prompts and the weights, as a single-turn step's are (resume repeats them bitwise).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from relay.agent.tool_call import CALL_CLOSE, parse_tool_call, result_text
from relay.agent.trajectory import EOS, LENGTH, LIVE, TURN_LIMIT, Trajectory
from relay.engines.base import Generation, SamplingSettings

TURN_SEED_STRIDE = 104_729

# (tool name, argument) per call -> {"text", "status" ("ok" | "error" | "timeout"), "seconds"} per call, in order.
ToolRunner = Callable[[list[tuple[str, str]]], list[dict]]
Generate = Callable[[Sequence[Sequence[int]], SamplingSettings], list[list[Generation]]]


class Tokenizer(Protocol):
    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...


@dataclass(frozen=True)
class AgentSettings:
    max_turns: int  # model turns per trajectory (1: single-turn; a call in the only turn is not run)
    max_response_length: int  # model and tool tokens of a response together
    result_max_tokens: int  # tokens of one tool result at most (the tool's text is already cut to its limit)


def stop_index(token_ids: Sequence[int], tokenizer: Tokenizer, stop: str = CALL_CLOSE) -> int | None:
    """The length of the shortest prefix of ``token_ids`` whose text contains ``stop``; None if none does.

    Tokens are decoded one at a time (a byte-level BPE token decodes on its own; the tag is ASCII), so finding
    the tag costs one decode per token, not one per prefix. Example: tokens decoding to ``"a", "</tool", "_call>",
    " b"`` give 3."""
    text = ""
    for k, token in enumerate(token_ids):
        piece = tokenizer.decode([token], skip_special_tokens=False)
        text = (text + piece)[-(len(stop) + len(piece)) :]
        if stop in text:
            return k + 1
    return None


def take_turn(t: Trajectory, g: Generation, tokenizer: Tokenizer, s: AgentSettings) -> str | None:
    """Append model turn ``g`` to ``t`` (cut at the first call's closing tag and at the response budget); return
    the turn's text when it ended in a tool call to run, else None (and ``t.ended`` says why it stopped)."""
    room = t.room(s.max_response_length)
    ids, log_probs = list(g.token_ids[:room]), list(g.log_probs[:room])
    cut = stop_index(ids, tokenizer)
    if cut is not None:
        ids, log_probs = ids[:cut], log_probs[:cut]
    t.add_model_turn(ids, log_probs)
    if cut is None:
        t.ended = EOS if g.finished and len(g.token_ids) <= room else LENGTH
        return None
    if t.turns >= s.max_turns:
        t.ended = TURN_LIMIT
        return None
    if t.room(s.max_response_length) <= 0:
        t.ended = LENGTH
        return None
    return tokenizer.decode(ids, skip_special_tokens=False)


def run_calls(turn_texts: list[str], run_tools: ToolRunner) -> list[dict]:
    """Each turn's call run (malformed ones answered here with an error, the rest in one ``run_tools`` batch)."""
    parsed = [parse_tool_call(text) for text in turn_texts]
    valid = [(p.name, p.argument) for p in parsed if not p.error]
    answers = iter(run_tools(valid) if valid else [])
    return [
        {"text": f"error: {p.error}", "status": "error", "seconds": None} if p.error else next(answers) for p in parsed
    ]


def append_result(t: Trajectory, result: dict, tokenizer: Tokenizer, s: AgentSettings) -> None:
    """The tool's answer as tokens after the call (at most ``result_max_tokens``, and what the budget leaves);
    a trajectory with no room left for another model turn ends."""
    ids = tokenizer.encode(result_text(result["text"]), add_special_tokens=False)[: s.result_max_tokens]
    room = t.room(s.max_response_length)
    t.add_tool_result(ids[:room], result["status"], result.get("seconds"))
    if t.room(s.max_response_length) <= 0:
        t.ended = LENGTH


def run_agent_loop(
    generate: Generate,
    prompts: Sequence[Sequence[int]],
    sampling: SamplingSettings,
    tokenizer: Tokenizer,
    run_tools: ToolRunner,
    settings: AgentSettings,
) -> list[list[Trajectory]]:
    """``result[i][j]``: the ``j``-th of ``sampling.n`` trajectories of ``prompts[i]`` (see the module docstring)."""
    stop = tuple(dict.fromkeys((*sampling.stop, CALL_CLOSE)))
    first = generate(prompts, replace(sampling, stop=stop))
    groups = [[Trajectory(list(p)) for _ in gens] for p, gens in zip(prompts, first, strict=True)]
    live = [(t, g) for ts, gens in zip(groups, first, strict=True) for t, g in zip(ts, gens, strict=True)]
    turn = 0
    while live:
        calls = [(t, text) for t, g in live if (text := take_turn(t, g, tokenizer, settings)) is not None]
        results = run_calls([text for _, text in calls], run_tools)
        for (t, _), result in zip(calls, results, strict=True):
            append_result(t, result, tokenizer, settings)
        going = [t for t, _ in calls if t.ended == LIVE]
        if not going:
            break
        turn += 1
        seed = None if sampling.seed is None else sampling.seed + TURN_SEED_STRIDE * turn
        longest = max(t.room(settings.max_response_length) for t in going)
        turn_sampling = replace(sampling, n=1, max_new_tokens=longest, seed=seed, stop=stop)
        turn_out = generate([t.context() for t in going], turn_sampling)
        live = [(t, gens[0]) for t, gens in zip(going, turn_out, strict=True)]
    return groups
