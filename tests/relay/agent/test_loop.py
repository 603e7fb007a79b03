"""The agent loop's bookkeeping, turn by turn: which tokens are the model's, the budget, the turn limit, the seeds,
and one batched engine call per turn. The engine here replays scripted turns (the loop is pure over its
``generate`` and ``run_tools`` arguments); the real engines run it in tests/roles/test_rollout_agent.py."""

from __future__ import annotations

from dataclasses import replace

import pytest
from transformers import AutoTokenizer

from relay.agent.loop import TURN_SEED_STRIDE, AgentSettings, run_agent_loop, stop_index
from relay.agent.trajectory import EOS, LENGTH, TURN_LIMIT
from relay.engines.base import Generation, SamplingSettings


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


class ScriptedEngine:
    """Answers call ``t`` with ``turns[t]``: one text per sequence of the call (the first call: per prompt, then
    per sample), each token's log-prob -0.5; a text ending in the EOS token's string is ``finished``. Records each
    call's prompts and settings."""

    def __init__(self, tok, turns: list[list[str]]) -> None:
        self.tok, self.turns, self.calls = tok, turns, []

    def __call__(self, prompts, sampling: SamplingSettings) -> list[list[Generation]]:
        self.calls.append(([list(p) for p in prompts], sampling))
        texts = iter(self.turns[len(self.calls) - 1])
        out = []
        for _ in prompts:
            group = []
            for _ in range(sampling.n):
                ids = self.tok.encode(next(texts), add_special_tokens=False)[: sampling.max_new_tokens]
                finished = bool(ids) and ids[-1] == self.tok.eos_token_id
                group.append(Generation(ids, [-0.5] * len(ids), finished))
            out.append(group)
        return out


def _tools(log: list):
    def run(calls):
        log.append(list(calls))
        return [
            {
                "text": str(eval(arg)) if name == "calculator" else "error: unknown",
                "status": "ok" if name == "calculator" else "error",
                "seconds": 0.01,
            }
            for name, arg in calls
        ]  # noqa: S307

    return run


def test_stop_index_finds_the_tag_across_tokens(tok) -> None:
    ids = tok.encode("a <tool_call>calculator: 1</tool_call> trailing words", add_special_tokens=False)
    cut = stop_index(ids, tok)
    assert tok.decode(ids[:cut]).endswith("</tool_call>") and not tok.decode(ids[: cut - 1]).endswith("</tool_call>")
    assert stop_index(tok.encode("no tag", add_special_tokens=False), tok) is None


def test_two_prompts_advance_together_and_tool_tokens_are_masked(tok) -> None:
    eos = tok.eos_token
    engine = ScriptedEngine(
        tok,
        [
            # turn 0, prompt-major, n=2: p0s0 calls, p0s1 answers, p1s0 calls, p1s1 calls an unknown tool
            [
                "x <tool_call>calculator: 2+3</tool_call>",
                f"#### 5{eos}",
                "<tool_call>calculator: 6*7</tool_call>",
                "<tool_call>web: q</tool_call>",
            ],
            # turn 1: the three live trajectories in order
            [f" so #### 5{eos}", f" #### 42{eos}", f" hmm{eos}"],
        ],
    )
    log: list = []
    settings = AgentSettings(max_turns=3, max_response_length=64, result_max_tokens=16)
    prompts = [tok.encode("q0", add_special_tokens=False), tok.encode("q1", add_special_tokens=False)]
    groups = run_agent_loop(
        engine, prompts, SamplingSettings(n=2, max_new_tokens=64, seed=7), tok, _tools(log), settings
    )
    assert len(engine.calls) == 2  # one engine call per turn, the live trajectories batched
    assert log == [[("calculator", "2+3"), ("calculator", "6*7"), ("web", "q")]]  # one tools batch per turn
    (a, b), (c, d) = groups
    assert [t.turns for t in (a, b, c, d)] == [2, 1, 2, 2]
    assert all(t.ended == EOS for t in (a, b, c, d))
    text = tok.decode(a.token_ids)
    assert text == f"x <tool_call>calculator: 2+3</tool_call><tool_result>5</tool_result> so #### 5{eos}"
    tool_ids = tok.encode("<tool_result>5</tool_result>", add_special_tokens=False)
    first = len(tok.encode("x <tool_call>calculator: 2+3</tool_call>", add_special_tokens=False))
    assert a.loss_mask == [1] * first + [0] * len(tool_ids) + [1] * (len(a.token_ids) - first - len(tool_ids))
    assert a.log_probs[first : first + len(tool_ids)] == [0.0] * len(tool_ids)
    assert (a.tool_calls, a.tool_errors, d.tool_calls, d.tool_errors) == (1, 0, 1, 1)
    # turn 1's prompts are the conversations so far, token for token; one sample each, the next seed stream
    turn1_prompts, turn1_sampling = engine.calls[1]
    assert turn1_prompts[0] == prompts[0] + a.token_ids[: first + len(tool_ids)]
    assert turn1_sampling.n == 1 and turn1_sampling.seed == 7 + TURN_SEED_STRIDE
    assert turn1_sampling.stop == ("</tool_call>",)
    assert a.generation().finished and a.generation().loss_mask == a.loss_mask


def test_malformed_call_is_a_tool_error_the_model_reads(tok) -> None:
    eos = tok.eos_token
    engine = ScriptedEngine(tok, [["<tool_call>2+3</tool_call>"], [f" ok{eos}"]])
    log: list = []
    settings = AgentSettings(max_turns=2, max_response_length=64, result_max_tokens=32)
    ((t,),) = run_agent_loop(engine, [[1, 2]], SamplingSettings(n=1, max_new_tokens=64), tok, _tools(log), settings)
    assert log == []  # nothing reached the tools
    assert "<tool_result>error: malformed tool call" in tok.decode(t.token_ids)
    assert (t.tool_calls, t.tool_errors, t.ended) == (1, 1, EOS)


def test_turn_limit_and_budget_end_trajectories(tok) -> None:
    call = "<tool_call>calculator: 1+1</tool_call>"
    engine = ScriptedEngine(tok, [[call, call], [call, f" done{tok.eos_token}"]])
    log: list = []
    settings = AgentSettings(max_turns=2, max_response_length=64, result_max_tokens=32)
    sampling = SamplingSettings(n=2, max_new_tokens=64)
    ((t0, t1),) = run_agent_loop(engine, [[1, 2]], sampling, tok, _tools(log), settings)
    # t0 calls again in its last allowed turn: that call is not run
    assert t0.ended == TURN_LIMIT and t0.turns == 2 and t0.tool_calls == 1 and len(log) == 1
    assert t1.ended == EOS and t1.turns == 2
    budget = len(tok.encode(call, add_special_tokens=False)) + 3  # room for the call and 3 result tokens
    engine = ScriptedEngine(tok, [[call]])
    settings = replace(settings, max_response_length=budget)
    ((t,),) = run_agent_loop(engine, [[1, 2]], SamplingSettings(n=1, max_new_tokens=budget), tok, _tools([]), settings)
    assert t.ended == LENGTH and len(t.token_ids) == budget and t.loss_mask[-3:] == [0, 0, 0]
