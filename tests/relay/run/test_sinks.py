"""Metric sinks: metrics.jsonl as before, real TensorBoard event files, W&B through a fake module."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

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
    """A run is watched while it runs: a step is in the event file when ``write`` returns."""
    sink = TensorBoardSink(tmp_path)
    sink.write(0, {"reward/mean": 1.0})
    assert read_scalars(tmp_path / "tensorboard") == {"reward/mean": {0: 1.0}}
    sink.close()


def test_tensorboards_own_reader_draws_a_resumed_runs_replayed_steps_once(tmp_path: Path) -> None:
    """TensorBoard's reader (its event multiplexer, as ``tensorboard --logdir`` loads a run) hides an earlier file's
    points at and after the ``SessionLog.START`` step a resumed run's file opens with: steps 3 and 4 of the first
    file, which the resumed run replays, are drawn once, from the second."""
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

    first = TensorBoardSink(tmp_path)
    for step in range(5):
        first.write(step, {"reward/mean": float(step)})
    first.close()
    resumed = TensorBoardSink(tmp_path, purge_step=3)
    resumed.write(3, {"reward/mean": 30.0})
    resumed.close()
    assert first.path != resumed.path
    runs = EventMultiplexer().AddRunsFromDirectory(str(tmp_path)).Reload()
    drawn = runs.GetAccumulator("tensorboard").Scalars("reward/mean")
    assert [(e.step, e.value) for e in drawn] == [(0, 0.0), (1, 1.0), (2, 2.0), (3, 30.0)]


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


def test_a_tensorboard_write_on_a_full_disk_raises_in_the_callers_thread_naming_the_directory(tmp_path: Path) -> None:
    """Under a file-size limit (as on a full disk) the step's write raises ``EFBIG`` in the caller's thread, naming
    the event directory, and closing afterwards neither blocks nor prints a traceback at exit."""
    code = (
        "import sys; from relay.faults import cap_file_size; from relay.run.sinks import TensorBoardSink, close_sinks\n"
        "sink = TensorBoardSink(sys.argv[1])\n"
        "cap_file_size(64)\n"
        "try:\n"
        "    sink.write(0, {f'k{i}': float(i) for i in range(200)})\n"
        "except OSError as exc: print('raised', exc.errno, 'tensorboard' in str(exc))\n"
        "print(len(close_sinks([sink])))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.split() == ["raised", "27", "True", "0"], (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
