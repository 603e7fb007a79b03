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

import importlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from relay.metrics import system as sm
from relay.run.events import append_line
from relay.run.jsonsafe import finite_number, to_jsonable

METRICS_NAME = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"


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
    """One scalar per metric key per step in ``<run_dir>/tensorboard/`` (tensorboardX event files).

    Non-numeric and non-finite values are skipped (TensorBoard draws NaN as a broken line); ``"step"`` is
    the x axis, not a scalar. tensorboardX writes from a background thread; with ``flush_secs=2`` a step is
    on disk about two seconds after ``write``, so ``tensorboard --logdir outputs`` shows progress; ``close``
    writes everything.
    """

    FLUSH_SECS = 2
    MAX_QUEUE = 1000  # events buffered before add_scalar blocks: one step has ~100 metrics

    def __init__(self, run_dir: Path, purge_step: int | None = None) -> None:
        """``purge_step``: on resume, TensorBoard hides the earlier files' points at and after this step
        (they ran after the checkpoint and are replayed)."""
        from tensorboardX import SummaryWriter

        self.log_dir = Path(run_dir) / TENSORBOARD_DIR
        self._writer = SummaryWriter(
            logdir=str(self.log_dir), max_queue=self.MAX_QUEUE, flush_secs=self.FLUSH_SECS, purge_step=purge_step
        )
        self._records = [_KeptErrors.install(w.event_writer) for w in (self._writer.all_writers or {}).values()]

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        """Queue the step's scalars; an error the writer thread met on an earlier write (a full disk) is raised here,
        in the driver's thread, as the metrics file's own write error would be."""
        for records in self._records:
            if records.error is not None:
                raise OSError(records.error.errno, f"{self.log_dir}: {records.error.strerror}") from records.error
        for key, value in metrics.items():
            number = finite_number(value)
            if key != sm.STEP and number is not None:
                self._writer.add_scalar(key, number, global_step=int(step))

    def close(self) -> None:
        """Flush and close the event files. When they cannot be written (a full disk, a file-size limit) the events
        are given up: each file writer is marked closed, or tensorboardX's own exit hook would flush again and end the
        run's output in a traceback (tensorboardX 2.6.5: ``FileWriter`` registers ``atexit`` cleanup, and
        ``EventFileWriter.close`` sets ``_closed`` and stops its writer thread only after its flush succeeded)."""
        writers = list((self._writer.all_writers or {}).values())
        try:
            self._writer.close()
        except OSError:
            for writer in writers:
                writer.event_writer._closed = True
                writer.event_writer._worker.stop()  # the failed flush skipped it: no thread left for the exit
            raise


class _KeptErrors:
    """The record writer of a tensorboardX event file as its background thread calls it (``write_event``,
    ``flush``), keeping the first ``OSError`` instead of letting it end the thread. Unguarded, a full disk ends that
    thread in a printed traceback, and once the queue has filled behind the dead thread every ``add_scalar`` blocks:
    the run hangs (tensorboardX 2.6.5, ``event_file_writer.py``: ``_EventLoggerThread.run`` catches only
    ``queue.Empty``, and ``add_event`` puts with ``block=True`` into a queue of ``max_queue`` events)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.error: OSError | None = None

    @classmethod
    def install(cls, event_writer: Any) -> _KeptErrors:
        kept = cls(event_writer._worker._record_writer)
        event_writer._worker._record_writer = kept
        return kept

    def write_event(self, event: Any) -> None:
        if self.error is None:
            try:
                self.inner.write_event(event)
            except OSError as exc:
                self.error = exc

    def flush(self) -> None:
        if self.error is None:
            try:
                self.inner.flush()
            except OSError as exc:
                self.error = exc


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
