"""Multi-turn training runs on Ray with the real tools role: the figures a user sees, dynamic sampling, the
one-step-off-policy pipeline and rollout correction on multi-turn trajectories, and an exact resume.

The model is the tiny one taught to answer with a calculator call (tests/conftest.py); the 8 training problems are
GSM8K questions whose answer is set to 5, so its well-formed answers are right and its strays are wrong: groups
with reward variance, and correct answers that called the tool.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from relay.checkpoint import checkpoint_path
from relay.config import LoadedConfig
from relay.repo import REPO_ROOT
from relay.run.digest import computed_metrics, differences
from tests.tiny_runs import crashed_copy, metric_rows, run_config
from trainer import main, train

# metrics that depend only on the data, the samples and the weights
DETERMINISTIC = (
    "reward/mean",
    "reward/accuracy",
    "response/length_mean",
    "actor/loss",
    "actor/kl",
    "actor/grad_norm",
    "logprob_gap/rollout_vs_learner_max",
    "offpolicy/staleness_mean",
    "agent/turns_mean",
    "agent/tool_calls_count",
    "agent/tool_errors_count",
    "agent/tool_tokens_mean",
    "agent/correct_with_tool_share",
)
AGENT_KEYS = (
    "agent/turns_mean",
    "agent/tool_calls_per_response",
    "agent/tool_errors_count",
    "agent/tool_timeouts_count",
    "agent/tool_latency_p50_s",
    "agent/tool_latency_p95_s",
    "agent/correct_with_tool_share",
)


@pytest.fixture(scope="module")
def answer_five(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "train8_answer5.jsonl"
    rows = [json.loads(ln) for ln in (REPO_ROOT / "data" / "gsm8k" / "train.jsonl").read_text().splitlines()[:8]]
    path.write_text("".join(json.dumps({"question": r["question"], "answer": "It is 5.\n#### 5"}) + "\n" for r in rows))
    return path


def _loaded(
    model_dir: Path, train_file: Path, out: Path, name: str, steps: int, resume: Path | None = None
) -> LoadedConfig:
    overrides = [
        f"data.train_path={train_file}",
        "data.prompt_template=tools",
        "data.max_response_length=48",
        "rollout.engine=hf",
        "rollout.agent.enable=true",
        "rollout.n=4",
        "algorithm.filter_groups.enable=true",
        "algorithm.filter_groups.metric=acc",
        "algorithm.filter_groups.max_extra_passes=1",
        "trainer.max_staleness=1",
        "algorithm.rollout_is=tis",
        "trainer.save_freq=1",
        "trainer.keep_checkpoints=0",
        "trainer.export_hf=false",
        "trainer.deterministic=true",
        f"trainer.output_dir={out}",
        f"trainer.run_name={name}",
    ]
    return run_config(model_dir, steps, overrides, resume)


def test_multi_turn_run_shows_its_tool_use_and_resumes_exactly(
    ray_session, tool_calling_model_dir, answer_five, tmp_path, capsys
) -> None:
    run_a, run_b = tmp_path / "a", tmp_path / "b"
    assert train(_loaded(tool_calling_model_dir, answer_five, tmp_path, "a", 3), tool_calling_model_dir, run_a) == 0
    a = metric_rows(run_a)
    for step, row in a.items():
        assert all(key in row for key in AGENT_KEYS), step
        assert row["agent/tool_calls_per_response"] > 0 and row["agent/turns_mean"] > 1
    assert [a[s]["offpolicy/staleness_mean"] for s in range(3)] == [0.0, 1.0, 1.0]
    # on-policy, the engine and the learner agree on the model's tokens (tool tokens carry no log-prob to compare)
    assert a[0]["logprob_gap/rollout_vs_learner_max"] < 1e-3
    assert max(a[s]["agent/correct_with_tool_share"] for s in range(3)) > 0
    header = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("step "))
    assert "calls" in header.split()  # the step table's tool-call column
    trace = json.loads((run_a / "timeline.json").read_text())
    tracks = {e["args"]["name"] for e in trace["traceEvents"] if e.get("ph") == "M" and e["name"] == "thread_name"}
    assert "tools" in tracks

    # run A's directory as a crash just after its first checkpoint leaves it, resumed from that checkpoint: the
    # pipeline's batch collected ahead (one step off policy) and the agent loop's samples continue exactly
    crashed_copy(run_a, run_b, last_checkpoint=1)
    resumed = _loaded(tool_calling_model_dir, answer_five, tmp_path, "b", 3, resume=run_b)
    assert train(resumed, tool_calling_model_dir, run_b, checkpoint_path(run_b, 1)) == 0
    b = metric_rows(run_b)
    assert sorted(b) == [0, 1, 2]
    for step in range(3):
        got = {k: b[step].get(k) for k in DETERMINISTIC}
        assert got == {k: a[step].get(k) for k in DETERMINISTIC}, step
    # every computed figure, as the chaos verdict compares; a failure names each key and both values
    assert differences(computed_metrics(run_a), computed_metrics(run_b)) == []


def test_a_bad_tools_config_exits_2_before_any_actor_starts(capsys) -> None:
    code = main(["--config", "configs/tiny.yaml", "--set", "rollout.agent.enable=true", "--set",
                 "rollout.agent.tools=[calculator,shell]", "--set", "tools.concurrency=0"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "unknown tool(s) 'shell'" in err and "tools.concurrency=0" in err
