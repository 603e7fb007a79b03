"""A run's directory and what it records, for watching a run and finding out afterwards what ran.

``outputs/<run name>/`` holds (pure Python, no Ray):

- ``manifest.json`` (``manifest.py``): config, derived sizes, seed, dataset and model fingerprints, git
  commit, package versions, host, cluster, relevant environment (secrets by name only);
- ``events.jsonl`` (``events.py``): start, resume, checkpoint, validation, skipped_batch, error, finish;
- ``metrics.jsonl`` and ``tensorboard/`` (``sinks.py``), and W&B when ``WANDB_PROJECT`` is set;
- ``plots/`` from ``python -m relay.run.summarize RUN_DIR`` (``summarize.py``, not imported here).
"""

from relay.run.events import EVENT_KINDS, EventLog, read_events
from relay.run.manifest import build_manifest, read_manifest, write_manifest
from relay.run.run_dir import RunDirError, create_run_dir, open_run_dir_for_resume
from relay.run.sinks import JsonlSink, MetricSink, SinkError, TensorBoardSink, WandbSink, build_sinks, close_sinks

__all__ = [
    "EVENT_KINDS",
    "EventLog",
    "JsonlSink",
    "MetricSink",
    "RunDirError",
    "SinkError",
    "TensorBoardSink",
    "WandbSink",
    "build_manifest",
    "build_sinks",
    "close_sinks",
    "create_run_dir",
    "open_run_dir_for_resume",
    "read_events",
    "read_manifest",
    "write_manifest",
]
