"""A role killed by Ray's memory monitor ends the run with one clear message.

A head of its own whose memory monitor treats the node as always full (``RAY_memory_usage_threshold=0.01``), so
Ray kills the role actors as they start, for real; the trainer joins it and must end with exit 1, the role and
its memory against the node's, what to change, where to resume from, and an ``out_of_memory`` error event,
without a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys

from benchmarks.harness.ray_head import isolated_head
from relay.repo import REPO_ROOT


def test_a_role_killed_for_memory_is_named_with_its_memory_and_the_fix(tiny_model_dir, tmp_path) -> None:
    monitor = {"RAY_memory_usage_threshold": "0.01", "RAY_memory_monitor_refresh_ms": "100"}
    with isolated_head(env=monitor) as head:
        cmd = [sys.executable, "trainer.py", "--config", "configs/tiny.yaml", "--set", f"model.path={tiny_model_dir}"]
        cmd += [
            "--set",
            "rollout.engine=hf",
            "--set",
            "trainer.total_training_steps=2",
            "--set",
            "trainer.run_name=oom",
        ]
        cmd += ["--set", f"trainer.output_dir={tmp_path}"]
        out = subprocess.run(cmd, env=head.driver_env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=400)
    err = out.stderr
    assert out.returncode == 1, err[-3000:]
    assert "Traceback" not in err and "OutOfMemoryError" not in err.split("error: ")[0], err[-3000:]
    assert "was killed" in err and "memory" in err, err[-3000:]
    assert "killed by Ray's memory monitor" in err and "what to change: run one job per node" in err, err[-3000:]
    assert "this node has" in err or "of this node's" in err, err[-3000:]
    assert "no checkpoint to resume from" in err or "--resume" in err, err[-3000:]
    events = [json.loads(line) for line in (tmp_path / "oom" / "events.jsonl").read_text().splitlines()]
    errors = [e for e in events if e.get("event") == "error"]
    assert errors and errors[-1]["kind"] == "out_of_memory", events[-3:]
    assert errors[-1]["node_memory_gib"] > 0
