"""What a process says about itself: its pid, and an incarnation that is the same for every answer of one process
and new in another (a restarted actor is another process); outside Ray, no node and no actor."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from relay.process_identity import process_identity


def test_one_process_answers_with_one_incarnation_and_another_with_another() -> None:
    here = process_identity()
    assert here == process_identity() and here["pid"] == os.getpid()
    code = "import json; from relay.process_identity import process_identity; print(json.dumps(process_identity()))"
    other = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert other["incarnation"] != here["incarnation"] and other["pid"] != here["pid"]
    assert other["node_id"] is None and other["actor_id"] is None  # a process without Ray
