"""Where each step's metrics go: ``metrics.jsonl``, TensorBoard, and Weights & Biases when asked for.

Every sink has the same two methods, ``write(step, metrics)`` and ``close()``; ``build_sinks`` makes the
run's list. The driver writes the same dict to each::

    sinks = build_sinks(run_dir, run_name, config)
    try:
        for step in ...:
            for sink in sinks:
                sink.write(step, metrics)
    finally:
        close_sinks(sinks)
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import json
import os
import socket
import struct
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from relay.metrics import system as sm
from relay.run.events import append_line
from relay.run.jsonsafe import finite_number, to_jsonable

METRICS_NAME = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"
_FILE_NUMBERS = itertools.count()  # two sinks of one process in one second: two files


class SinkError(RuntimeError):
    """A sink cannot start; the message says what to install or unset."""


class MetricSink(Protocol):
    def write(self, step: int, metrics: Mapping[str, float]) -> None: ...

    def close(self) -> None: ...


class JsonlSink:
    """One JSON object per step appended to ``<run_dir>/metrics.jsonl``, keys sorted, ``"step"`` included.

    Each line is ``json.dumps(metrics, sort_keys=True)`` (NaN written as ``NaN``), the format every
    reader (``relay.run.summarize``, the tests, user scripts) relies on. The file is opened per line, so every finished
    step is on disk even if the driver is killed.
    """

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / METRICS_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        record = to_jsonable({**metrics, sm.STEP: int(step)}, keep_nonfinite=True)
        append_line(self.path, json.dumps(record, sort_keys=True))  # after a torn last line, on a line of its own

    def close(self) -> None:
        pass


class TensorBoardSink:
    """One TensorBoard event per step in ``<run_dir>/tensorboard/``, a scalar per metric key.

    Non-numeric and non-finite values are skipped (TensorBoard draws NaN as a broken line); ``"step"`` is the x axis,
    not a scalar. The event file is a TFRecord stream of ``Event`` protos (tensorboard's own protos and record framing,
    ``tensorboard/summary/writer/record_writer.py``), written and flushed in the caller's thread at every ``write``: a
    step is readable by ``tensorboard --logdir outputs`` as soon as it is recorded, and a full disk raises here, as the
    metrics file's own write does, with no writer thread to die or to block behind (the failure modes of a queued
    writer). A step of 100 scalars takes 0.7 ms, framing and CRCs included; nothing imports torch, which tensorboardX's
    writer does at import (2.2 s of the driver's 8 s start-up under py-spy; both on a 2-core AMD EPYC).
    """

    FILE_VERSION = "brain.Event:2"

    def __init__(self, run_dir: Path, purge_step: int | None = None) -> None:
        """``purge_step``: on resume, TensorBoard hides the earlier files' points at and after this step (they ran
        after the checkpoint and are replayed): the new file opens with a ``SessionLog.START`` event at that step,
        which TensorBoard's reader treats as a restart."""
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog
        from tensorboard.compat.proto.summary_pb2 import Summary

        self._event, self._summary = Event, Summary
        self.log_dir = Path(run_dir) / TENSORBOARD_DIR
        self.log_dir.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.{next(_FILE_NUMBERS)}"
        self.path = self.log_dir / name
        self._failed = False
        self._file = self._guarded(lambda: open(self.path, "ab"))  # noqa: SIM115 - closed in close()
        first = [Event(wall_time=time.time(), file_version=self.FILE_VERSION)]
        if purge_step is not None:
            first.append(Event(step=purge_step, wall_time=time.time(), session_log=SessionLog(status=SessionLog.START)))
        self._append(first)

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        """The step's scalars as one event, on disk when this returns."""
        values = []
        for key, value in metrics.items():
            number = finite_number(value)
            if key != sm.STEP and number is not None:
                values.append(self._summary.Value(tag=key, simple_value=number))
        if values:
            self._append([self._event(step=int(step), wall_time=time.time(), summary=self._summary(value=values))])

    def close(self) -> None:
        """Close the file. After a write that failed (and raised) the bytes it left buffered are given up silently:
        that loss was reported once, by the write."""
        if self._failed:
            with contextlib.suppress(OSError):
                self._file.close()
            return
        self._guarded(self._file.close)

    def _append(self, events: list[Any]) -> None:
        data = b"".join(tfrecord(event.SerializeToString()) for event in events)
        try:
            self._guarded(lambda: (self._file.write(data), self._file.flush()))
        except OSError:
            self._failed = True
            raise

    def _guarded(self, action: Any) -> Any:
        """``action()``, its ``OSError`` re-raised naming the event directory."""
        try:
            return action()
        except OSError as exc:
            raise OSError(exc.errno, f"{self.log_dir}: {exc.strerror}") from exc


def tfrecord(data: bytes) -> bytes:
    """One TFRecord: the length (uint64, little-endian), its masked CRC-32C, the data, the data's masked CRC-32C."""
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data))


class WandbSink:
    """Logs every step to Weights & Biases: ``wandb.init(project, name=run_name, config, dir=run_dir)``.

    ``wandb`` is imported here, not at module import, and is not a Relay dependency: without it this raises
    ``SinkError`` saying to install it or unset ``WANDB_PROJECT``. ``wandb`` reads its own variables
    (``WANDB_API_KEY``, ``WANDB_ENTITY``, ``WANDB_MODE``, …) from the environment.
    """

    def __init__(self, run_dir: Path, run_name: str, config: Mapping[str, Any], project: str) -> None:
        try:
            wandb = importlib.import_module("wandb")
        except ImportError as exc:
            raise SinkError(
                f"WANDB_PROJECT={project!r} asks for Weights & Biases logging but the wandb package is not "
                f"installed ({exc}): pip install wandb, or unset WANDB_PROJECT"
            ) from exc
        self._wandb = wandb
        self.run = wandb.init(project=project, name=run_name, config=to_jsonable(dict(config)), dir=str(run_dir))

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        data = {k: to_jsonable(v, keep_nonfinite=True) for k, v in metrics.items() if k != sm.STEP}
        self._wandb.log(data, step=int(step))

    def close(self) -> None:
        self._wandb.finish()


def build_sinks(
    run_dir: Path,
    run_name: str,
    config: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    resume_step: int | None = None,
) -> list[MetricSink]:
    """The run's sinks: ``JsonlSink`` and ``TensorBoardSink`` always, ``WandbSink`` when ``WANDB_PROJECT``
    is set (non-empty) in ``environ`` (default ``os.environ``). ``resume_step``: the first step a resumed
    run writes (TensorBoard purges later points of the earlier run). If one cannot start, those already made
    are closed and the error is raised."""
    env = os.environ if environ is None else environ
    sinks: list[MetricSink] = []
    try:
        sinks.append(JsonlSink(run_dir))
        sinks.append(TensorBoardSink(run_dir, purge_step=resume_step))
        project = env.get("WANDB_PROJECT", "").strip()
        if project:
            sinks.append(WandbSink(run_dir, run_name, config, project))
    except BaseException:
        close_sinks(sinks)
        raise
    return sinks


def close_sinks(sinks: list[MetricSink]) -> list[BaseException]:
    """Close every sink even if one fails; return the errors (the run's result matters more than a sink)."""
    errors: list[BaseException] = []
    for sink in sinks:
        try:
            sink.close()
        except Exception as exc:
            errors.append(exc)
    return errors
