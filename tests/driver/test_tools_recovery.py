"""The tools role on Ray: hostile calls are contained, counted and harmless to the run; a tools actor killed while
a step's calls run on it is restarted by Ray and the step retried.

The model is the tiny one taught to answer with a two-second ``python`` call (tests/conftest.py), so a step's
calls are still running when the test kills the actor. Processes are killed with SIGKILL, as a crash would.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import psutil
import pytest
from transformers import AutoTokenizer

from driver.launch import start_roles, stop_roles
from driver.step import run_step
from placement.plan import build_plan
from relay.config import load_config
from relay.grpo.kl_controller import KLController
from relay.repo import REPO_ROOT
from relay.tasks.prompt_source import PromptSource
from roles.role_call import call
from tests.conftest import PYTHON_CALLING_ANSWER, build_answer_model
from tests.relay.tools.sandbox_processes import sandbox_processes

HOSTILE = {
    "infinite loop": "while True: pass",
    "fork bomb": "import os\nwhile True: os.fork()",
    "huge allocation": "x = bytearray(10**10)",
    "file outside the sandbox": "print(open('/etc/hostname').read())",
    "socket": "import socket\nsocket.create_connection(('127.0.0.1', 22))",
    "10 MB output": "print('x' * 10_000_000)",
}


@pytest.fixture(scope="module")
def running(ray_session, tiny_model_dir, tmp_path_factory):
    model = build_answer_model(tiny_model_dir, tmp_path_factory.mktemp("tiny-llama-python"), PYTHON_CALLING_ANSWER)
    loaded = load_config(
        REPO_ROOT / "configs" / "tiny.yaml",
        [
            f"model.path={model}",
            "rollout.engine=hf",
            "rollout.batch_size=2",
            "rollout.n=2",
            "train.micro_batch_size=4",
            "data.prompt_template=tools",
            "data.max_response_length=64",
            "rollout.agent.enable=true",
            "rollout.agent.tools=[python,calculator]",
            "tools.timeout_s=3",
            "tools.cpu_seconds=1",
            "tools.max_output_chars=200",
            "trainer.role_restarts=2",
        ],
        environ={},
    )
    run_dir = tmp_path_factory.mktemp("run")
    roles = start_roles(loaded, build_plan(loaded.cfg), str(model), log_dir=run_dir / "logs")
    prompts = PromptSource.from_config(loaded.cfg.data, AutoTokenizer.from_pretrained(model), 2)
    yield loaded.cfg, roles, prompts
    stop_roles(roles)


def _tools_pid(roles) -> int:
    return call(["tools-0"], [roles.group("tools")[0].ready.remote()], "pid")[0]["pid"]


def test_hostile_calls_are_contained_counted_and_harmless(running) -> None:
    _, roles, _ = running
    tools = roles.group("tools")[0]
    pid, started = _tools_pid(roles), time.time()
    calls = [("python", code) for code in HOSTILE.values()]
    results = call(["tools-0"], [tools.call.remote(calls)], "hostile calls")[0]
    for name, result in zip(HOSTILE, results, strict=True):
        assert result["status"] in ("error", "timeout") or name == "10 MB output", (name, result)
        assert len(result["text"]) <= 300, name  # the model reads at most tools.max_output_chars (+ a marker)
    assert "root:" not in results[3]["text"]
    assert sum(r["status"] in ("error", "timeout") for r in results) >= len(HOSTILE) - 1
    assert _tools_pid(roles) == pid  # the same actor, alive
    (ok,) = call(["tools-0"], [tools.call.remote([("python", "print(6 * 7)")])], "after")[0]
    assert ok == {**ok, "text": "42", "status": "ok"}
    assert not sandbox_processes({pid}, started), "sandbox processes left behind"


def test_a_tools_actor_killed_mid_step_is_restarted_and_the_step_retried(running) -> None:
    cfg, roles, prompts = running
    old = _tools_pid(roles)
    out: dict = {}
    step = threading.Thread(
        target=lambda: out.update(
            result=run_step(roles, prompts.next_batch(), cfg, 0, KLController.from_config(cfg.algorithm))
        )
    )
    step.start()
    deadline = time.monotonic() + 120
    while not psutil.Process(old).children(recursive=True):  # a sandboxed python call is running
        assert time.monotonic() < deadline and step.is_alive(), "no python call started"
        time.sleep(0.02)
    os.kill(old, signal.SIGKILL)
    step.join(timeout=300)
    batch, metrics = out["result"]
    assert metrics["recovery/restarts"] == 1.0
    assert metrics["agent/tool_calls_count"] > 0 and len(batch) == 4
    assert _tools_pid(roles) != old
