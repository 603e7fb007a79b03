"""Metric sinks: metrics.jsonl as before, real TensorBoard event files, W&B through a fake module."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest
from tensorboardX.proto.event_pb2 import Event
from tensorboardX.record_writer import masked_crc32c

from relay.run.sinks import JsonlSink, SinkError, TensorBoardSink, WandbSink, build_sinks, close_sinks

STEPS = [
    {"step": 0, "reward/mean": 0.25, "reward/accuracy": 0.125, "actor/kl": 0.0, "timing/step": 12.5},
    {"step": 1, "reward/mean": 0.5, "reward/accuracy": 0.25, "actor/kl": 0.001, "timing/step": 11.0},
    {"step": 2, "reward/mean": 0.75, "reward/accuracy": float("nan"), "actor/kl": 0.002, "timing/step": 10.0},
]


def read_tfrecords(path: Path) -> list[bytes]:
    """The records of a TFRecord file, checking the length and data CRCs of each."""
    data, records, pos = path.read_bytes(), [], 0
    while pos < len(data):
        header = data[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[pos + 8 : pos + 12])
        assert header_crc == masked_crc32c(header)
        body = data[pos + 12 : pos + 12 + length]
        (body_crc,) = struct.unpack("<I", data[pos + 12 + length : pos + 16 + length])
        assert body_crc == masked_crc32c(body)
        records.append(body)
        pos += 16 + length
    return records


def read_scalars(log_dir: Path) -> dict[str, dict[int, float]]:
    scalars: dict[str, dict[int, float]] = {}
    for path in sorted(log_dir.glob("events.out.tfevents.*")):
        for record in read_tfrecords(path):
            event = Event.FromString(record)
            for value in event.summary.value:
                scalars.setdefault(value.tag, {})[event.step] = value.simple_value
    return scalars


def test_jsonl_sink_writes_one_sorted_json_line_per_step(tmp_path: Path) -> None:
    new = tmp_path / "new"
    sink = JsonlSink(new)
    for metrics in STEPS:
        sink.write(metrics["step"], {k: v for k, v in metrics.items() if k != "step"})
    sink.close()
    expected = "".join(json.dumps(m, sort_keys=True) + "\n" for m in STEPS)  # the format readers rely on
    assert (new / "metrics.jsonl").read_text() == expected
    rows = [json.loads(line) for line in (new / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]


def test_jsonl_sink_converts_numpy(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path)
    sink.write(np.int64(4), {"reward/mean": np.float32(0.5), "rollout/new_tokens": np.int64(12)})
    assert json.loads((tmp_path / "metrics.jsonl").read_text()) == {
        "reward/mean": 0.5,
        "rollout/new_tokens": 12,
        "step": 4,
    }


def test_tensorboard_round_trip(tmp_path: Path) -> None:
    sink = TensorBoardSink(tmp_path)
    for metrics in STEPS:
        sink.write(metrics["step"], {**metrics, "note": "text is skipped", "inf": float("inf")})
    sink.close()
    scalars = read_scalars(tmp_path / "tensorboard")
    assert set(scalars) == {"reward/mean", "reward/accuracy", "actor/kl", "timing/step"}
    assert scalars["reward/mean"] == {0: 0.25, 1: 0.5, 2: 0.75}
    assert scalars["reward/accuracy"] == {0: 0.125, 1: 0.25}  # NaN at step 2 skipped
    assert scalars["timing/step"] == {0: 12.5, 1: 11.0, 2: 10.0}


def test_tensorboard_is_readable_before_close(tmp_path: Path) -> None:
    """A run is watched while it runs: a step reaches the event file within a few seconds of ``write``."""
    sink = TensorBoardSink(tmp_path)
    sink.write(0, {"reward/mean": 1.0})
    deadline = time.monotonic() + 5 * TensorBoardSink.FLUSH_SECS
    while (scalars := read_scalars(tmp_path / "tensorboard")) == {} and time.monotonic() < deadline:
        time.sleep(0.1)
    assert scalars == {"reward/mean": {0: 1.0}}
    sink.close()


def test_build_sinks_without_wandb_project(tmp_path: Path) -> None:
    sinks = build_sinks(tmp_path, "r", {"a": 1}, environ={"WANDB_PROJECT": ""})
    assert [type(s) for s in sinks] == [JsonlSink, TensorBoardSink]
    for s in sinks:
        s.write(0, {"reward/mean": 0.5})
    assert close_sinks(sinks) == []
    assert (tmp_path / "metrics.jsonl").is_file() and read_scalars(tmp_path / "tensorboard")


@pytest.fixture
def fake_wandb(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """A stand-in for the wandb module (an outside service) that records the calls Relay makes."""
    calls: list[tuple] = []
    module = types.ModuleType("wandb")
    module.init = lambda **kwargs: calls.append(("init", kwargs)) or types.SimpleNamespace(id="run-id")
    module.log = lambda data, step=None: calls.append(("log", dict(data), step))
    module.finish = lambda: calls.append(("finish",))
    monkeypatch.setitem(sys.modules, "wandb", module)
    return types.SimpleNamespace(module=module, calls=calls)


def test_wandb_sink_with_fake_module(tmp_path: Path, fake_wandb: types.SimpleNamespace) -> None:
    config = {"trainer": {"run_name": "r"}, "path": tmp_path}
    sinks = build_sinks(tmp_path, "grpo-run", config, environ={"WANDB_PROJECT": "relay-tests"})
    assert [type(s) for s in sinks] == [JsonlSink, TensorBoardSink, WandbSink]
    for metrics in STEPS[:2]:
        for sink in sinks:
            sink.write(metrics["step"], metrics)
    close_sinks(sinks)
    assert fake_wandb.calls[0] == (
        "init",
        {
            "project": "relay-tests",
            "name": "grpo-run",
            "config": {"trainer": {"run_name": "r"}, "path": str(tmp_path)},
            "dir": str(tmp_path),
        },
    )
    assert fake_wandb.calls[1] == ("log", {k: v for k, v in STEPS[0].items() if k != "step"}, 0)
    assert fake_wandb.calls[2][2] == 1 and fake_wandb.calls[-1] == ("finish",)
    assert len(fake_wandb.calls) == 4


def test_wandb_missing_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb -> ImportError
    closed: list[type] = []
    for cls in (JsonlSink, TensorBoardSink):
        original = cls.close
        monkeypatch.setattr(cls, "close", lambda self, cls=cls, original=original: closed.append(cls) or original(self))
    with pytest.raises(SinkError) as info:
        build_sinks(tmp_path, "r", {}, environ={"WANDB_PROJECT": "relay"})
    message = str(info.value)
    assert "WANDB_PROJECT='relay'" in message and "pip install wandb" in message and "unset WANDB_PROJECT" in message
    assert closed == [JsonlSink, TensorBoardSink]  # the sinks already started were closed


def test_a_row_written_after_a_torn_last_line_is_read_back(tmp_path: Path) -> None:
    """A driver killed mid-line leaves ``{"step": 1, "rew``; the next row must not be glued onto it."""
    from relay.run.summarize import load_metrics

    (tmp_path / "metrics.jsonl").write_text('{"step": 0, "reward/mean": 0.5}\n{"step": 1, "rew')
    JsonlSink(tmp_path).write(1, {"reward/mean": 0.25})
    assert [r["reward/mean"] for r in load_metrics(tmp_path / "metrics.jsonl")] == [0.5, 0.25]


def test_a_tensorboard_sink_that_cannot_flush_ends_without_a_traceback_at_exit(tmp_path: Path) -> None:
    """Under a file-size limit (as on a full disk) the close fails once, inside close_sinks; tensorboardX's exit hook
    must not flush again and print a traceback after Relay's own message."""

    code = (
        "import sys; from relay.faults import cap_file_size; from relay.run.sinks import TensorBoardSink, close_sinks\n"
        "sink = TensorBoardSink(sys.argv[1])\n"
        "cap_file_size(64)\n"
        "sink.write(0, {f'k{i}': float(i) for i in range(200)})\n"
        "print([type(e).__name__ for e in close_sinks([sink])])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "['OSError']", proc.stderr
    assert "Exception ignored in atexit callback" not in proc.stderr, proc.stderr


def test_a_tensorboard_write_error_in_the_writer_thread_reaches_the_driver_and_nothing_blocks(tmp_path: Path) -> None:
    """A full disk under the writer thread: no traceback from that thread, no ``add_scalar`` blocked behind it (the
    queue holds 10 events here, and 30 steps of 200 scalars are written after the failure), and the next ``write``
    raises the error in the caller's thread, naming the directory."""

    code = (
        "import sys, time; from relay.faults import cap_file_size\n"
        "from relay.run.sinks import TensorBoardSink, close_sinks\n"
        "TensorBoardSink.MAX_QUEUE = 10\n"
        "sink = TensorBoardSink(sys.argv[1])\n"
        "cap_file_size(64)\n"
        "sink.write(0, {f'k{i}': float(i) for i in range(200)})\n"
        "time.sleep(3 * TensorBoardSink.FLUSH_SECS)\n"
        "try:\n"
        "    for step in range(1, 31): sink.write(step, {f'k{i}': float(i) for i in range(200)})\n"
        "except OSError as exc: print('raised', exc.errno, 'tensorboard' in str(exc))\n"
        "print([type(e).__name__ for e in close_sinks([sink])])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    said = proc.stdout.split()
    assert proc.returncode == 0 and said == ["raised", "27", "True", "['OSError']"], (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "Exception in thread" not in proc.stderr, proc.stderr
