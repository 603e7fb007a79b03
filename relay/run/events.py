"""``events.jsonl``: what happened during a run, one JSON object per line, written as it happens."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from relay.run.jsonsafe import to_jsonable

EVENTS_NAME = "events.jsonl"

# The kinds the driver writes. Any other string is accepted too: an event log must never turn an error
# path into a different error.
EVENT_KINDS: tuple[str, ...] = (
    "start",
    "resume",
    "checkpoint",
    "validation",
    "skipped_batch",
    "error",
    "finish",
    "fault_armed",
)


class EventLog:
    """Appends events to ``<run_dir>/events.jsonl``; each line is flushed when written, on a line of its own even
    after a line a killed run left cut short (:func:`append_line`).

    Example::

        events = EventLog(run_dir)
        events.write("checkpoint", step=10, path=run_dir / "checkpoints" / "step_10")
        # {"time": "2025-01-01T12:00:00.123+00:00", "event": "checkpoint", "step": 10, "path": ".../step_10"}

    Field values are made JSON-safe (numpy scalars and arrays, paths, non-finite floats as strings).
    """

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / EVENTS_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append one event and return the record. ``time`` and ``event`` are reserved field names. A file that
        cannot be written (a full disk, a file-size limit) costs the event, not the run: the error paths write
        events too, and their message must still reach the terminal, so the failure is one line on stderr."""
        reserved = {"time", "event"} & fields.keys()
        if reserved:
            raise ValueError(f"event fields {sorted(reserved)} are reserved; use other names")
        record = {"time": utc_now_iso(), "event": str(event), **to_jsonable(fields)}
        try:
            append_line(self.path, json.dumps(record, allow_nan=False))
        except OSError as exc:
            print(f"warning: {self.path}: the {event!r} event was not written: {exc}", file=sys.stderr)
        return record


def append_line(path: Path, line: str) -> None:
    """Append ``line`` and a newline to ``path``, flushed; when the file does not end with a newline (its last line
    was cut short by a run killed mid-write), a newline goes first, so the torn line stays a line of its own that
    readers skip instead of swallowing this one. Only the last byte is read to check."""
    with Path(path).open("ab+") as f:
        start = b"\n" if _ends_mid_line(f) else b""
        f.write(start + (line + "\n").encode())
        f.flush()


def _ends_mid_line(f: BinaryIO) -> bool:
    """Whether the open file ``f`` is not empty and its last byte is not a newline."""
    if f.seek(0, os.SEEK_END) == 0:
        return False
    f.seek(-1, os.SEEK_END)
    return f.read(1) != b"\n"


def read_events(run_dir: Path) -> list[dict[str, Any]]:
    """The events of a run in order; ``[]`` without ``events.jsonl``. Lines that do not parse (a run killed
    mid-write) are skipped."""
    path = Path(run_dir) / EVENTS_NAME
    if not path.is_file():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            events.append(record)
    return events


def utc_now_iso() -> str:
    """Now in UTC, ISO 8601 with milliseconds, e.g. ``2025-01-01T12:00:00.123+00:00``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")
