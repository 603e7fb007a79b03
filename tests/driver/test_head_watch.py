"""The head watch: a GCS port that stops accepting connections ends the driver within the bound, with the error
line, the resume hint and an ``error`` event; one that keeps answering leaves the run alone. (The real GCS killed
under a run is a ``kill_gcs`` fault campaign: ``python -m benchmarks.faults.chaos --head-loss``.)"""

from __future__ import annotations

import doctest
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

from driver import head_watch

WATCHED = """
import sys, time
from pathlib import Path
from driver.head_watch import HeadWatch
from relay.run.events import EventLog
run_dir = Path(sys.argv[1])
with HeadWatch(run_dir, EventLog(run_dir), gcs_address=sys.argv[2], lost_after=1.0):
    print("watching", flush=True)
    time.sleep(float(sys.argv[3]))  # the main thread busy, as inside a Ray call
print("finished")
"""


def test_the_docstring_examples_hold() -> None:
    assert doctest.testmod(head_watch).failed == 0


def _watched(tmp_path: Path, address: str, busy_s: float) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", WATCHED, str(tmp_path), address, str(busy_s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_gcs_that_stops_answering_ends_the_run_with_its_reason_and_the_resume_hint(tmp_path) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    address = f"127.0.0.1:{server.getsockname()[1]}"
    proc = _watched(tmp_path, address, busy_s=60)
    assert proc.stdout.readline().strip() == "watching"
    time.sleep(2.5)  # answered: the watch lets the run be
    assert proc.poll() is None
    server.close()  # the GCS is gone: connections refused
    start = time.monotonic()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and time.monotonic() - start < 10
    assert f"error: the Ray head's GCS at {address} stopped answering" in err
    assert "no checkpoint to resume from" in err and "finished" not in out
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "error" and events[-1]["kind"] == "head_lost"


def test_a_run_that_ends_while_the_gcs_answers_is_left_alone(tmp_path) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    proc = _watched(tmp_path, f"127.0.0.1:{server.getsockname()[1]}", busy_s=2.5)
    out, err = proc.communicate(timeout=30)
    server.close()
    assert proc.returncode == 0 and out.split() == ["watching", "finished"], err
