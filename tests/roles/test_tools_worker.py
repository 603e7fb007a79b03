"""The tools worker, instantiated directly (no Ray): results in order, calls run concurrently up to the
configured count, names outside the pool are errors, and the counters add up."""

from __future__ import annotations

import os
import threading

import psutil
import pytest
import ray

from relay.tools import ToolError, ToolLimits
from roles.tools import ToolsSettings, ToolsWorker

CFG = {
    "names": ["calculator", "python"],
    "timeout_s": 1.5,
    "cpu_seconds": 1.0,
    "memory_mb": 128,
    "max_output_chars": 100,
    "max_input_chars": 500,
    "concurrency": 2,
}


def _worker(cfg: dict, **kw) -> ToolsWorker:
    """A worker built from a ``tools`` section whose ``names`` are the tools it serves."""
    return ToolsWorker(ToolsSettings.from_section(cfg, cfg["names"]), **kw)


@pytest.fixture
def worker():
    w = _worker(dict(CFG))
    yield w
    w.close()


def test_ready(worker: ToolsWorker) -> None:
    info = worker.ready()
    assert info["role"] == "tools" and info["pid"] == os.getpid()
    # This process's node when an earlier test of the session initialised Ray here, else none.
    expected_node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    assert info["node_id"] == expected_node
    assert info["tools"] == ["calculator", "python"]
    assert info["sandbox"]["audit_hook"] is True and "network_namespace" in info["sandbox"]


def test_limits_come_from_the_config(worker: ToolsWorker) -> None:
    assert worker.limits == ToolLimits(
        timeout_s=1.5, cpu_seconds=1.0, memory_mb=128, max_output_chars=100, max_input_chars=500
    )
    assert _worker({"names": ["calculator"]}).limits == ToolLimits()  # missing keys: the defaults


def test_results_in_order_with_every_status(worker: ToolsWorker) -> None:
    results = worker.call(
        [
            ("python", "print(6 * 7)"),
            ("calculator", "2 ^ 10"),
            ("calculator", "1 / 0"),
            ("python", "import time\ntime.sleep(10)"),
            ("search", "weather"),
        ]
    )
    assert [(r["text"], r["status"]) for r in results] == [
        ("42", "ok"),
        ("1024", "ok"),
        ("error: division by zero", "error"),
        ("error: timed out after 1.5 s (wall clock)", "timeout"),
        ("error: unknown tool 'search'; available tools: calculator, python", "error"),
    ]
    assert all(set(r) == {"text", "status", "seconds"} and r["seconds"] >= 0 for r in results)


def test_a_registered_tool_outside_the_pool_is_an_error() -> None:
    w = _worker({"names": ["calculator"]})
    try:
        [result] = w.call([("python", "print(1)")])
    finally:
        w.close()
    assert result == {
        "text": "error: unknown tool 'python'; available tools: calculator",
        "status": "error",
        "seconds": result["seconds"],
    }


def _barrier_tool(barrier: threading.Barrier):
    def tool(argument: str, limits: ToolLimits) -> str:
        try:
            barrier.wait(timeout=1.0)  # passes only when `parties` calls are in it at once
        except threading.BrokenBarrierError as exc:
            raise ToolError("ran alone") from exc
        return argument

    return tool


@pytest.mark.parametrize(("concurrency", "statuses"), [(3, ["ok"] * 3), (1, ["error"] * 3)])
def test_calls_run_concurrently_up_to_the_configured_count(concurrency: int, statuses: list[str]) -> None:
    barrier = threading.Barrier(3)
    w = _worker({"names": ["meet"], "concurrency": concurrency}, tools={"meet": _barrier_tool(barrier)})
    try:
        results = w.call([("meet", "a"), ("meet", "b"), ("meet", "c")])
    finally:
        w.close()
    assert [r["status"] for r in results] == statuses
    if concurrency == 3:
        assert [r["text"] for r in results] == ["a", "b", "c"]


def test_python_calls_overlap(worker: ToolsWorker) -> None:
    """Each call prints when it started and ended its sleep: the second started before the first ended (an overlap
    of the two, not a wall-clock bound, which a loaded machine would break)."""
    code = "import time\nstart = time.time()\ntime.sleep(0.6)\nprint(start, time.time())"
    results = worker.call([("python", code)] * 2)
    spans = [tuple(float(x) for x in r["text"].split()) for r in results]
    assert max(start for start, _ in spans) < min(end for _, end in spans)


def test_each_result_has_its_status_and_seconds(worker: ToolsWorker) -> None:
    first = worker.call([("calculator", "1 + 1"), ("calculator", "x"), ("python", "print(1)")])
    second = worker.call([("python", "import time\ntime.sleep(10)"), ("nope", "")])
    assert [r["status"] for r in first + second] == ["ok", "error", "ok", "timeout", "error"]
    assert second[0]["seconds"] >= 1.0  # stopped at the limit, not after 10 s
    assert "calculator" in second[1]["text"] and "python" in second[1]["text"]  # the tools it serves


def test_hostile_calls_at_once_are_each_contained(worker: ToolsWorker) -> None:
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    results = worker.call(
        [
            ("python", "while True:\n    pass"),
            ("python", "import os\nwhile True:\n    os.fork()"),
            ("python", "x = bytearray(10**10)"),
            ("python", "print('x' * 10_000_000)"),
            ("calculator", "9 ** 9 ** 9"),
        ]
    )
    assert [r["status"] for r in results] == ["timeout", "error", "error", "ok", "error"]
    assert len(results[3]["text"]) < 200
    assert {child.pid for child in psutil.Process().children(recursive=True)} <= before


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"names": ["calculator", "shell"]}, r"unknown tool name\(s\) 'shell'; available tools: calculator, python"),
        ({"names": []}, "at least one tool"),
        ({"names": ["calculator"], "concurrency": 0}, "concurrency must be at least 1"),
        ({"names": ["calculator"], "memory_mb": 0}, "memory_mb must be positive"),
    ],
)
def test_bad_config_is_refused(cfg: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _worker(cfg)
