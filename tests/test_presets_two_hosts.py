"""The 2-host TPU preset on a two-node Ray cluster of this machine (``ray start``, :mod:`benchmarks.harness.ray_head`):
its learner spans two hosts (a STRICT_SPREAD placement group), one learner process per node, on the tiny Qwen2 of
``tests/test_presets_qwen.py``."""

from __future__ import annotations

import json

import pytest

from relay.config import load_config
from relay.repo import CONFIGS_DIR
from tests.presets import NEEDS_TWO_NODES, check_preset_run, overrides


@pytest.mark.parametrize("preset", list(NEEDS_TWO_NODES))
def test_a_two_host_preset_runs_two_steps_on_two_nodes(preset: str, request, tmp_path) -> None:
    """The 2-host TPU preset on two raylets of this machine (``ray start``): one learner process per node joined in
    one JAX job (gloo on CPU), the other roles beside them; ``python trainer.py`` joins that cluster."""
    import subprocess
    import sys

    from benchmarks.harness.ray_head import isolated_head, worker_node
    from relay.repo import REPO_ROOT

    fixture, shorter = NEEDS_TWO_NODES[preset]
    model_dir = request.getfixturevalue(fixture)
    argv = [sys.executable, "trainer.py", "--config", f"configs/{preset}"]
    for override in overrides(model_dir, tmp_path, shorter):
        argv += ["--set", override]
    with isolated_head(num_cpus=2, dashboard=False) as head, worker_node(head, num_cpus=2):
        done = subprocess.run(argv, cwd=REPO_ROOT, env=head.driver_env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = tmp_path / "preset"
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    (roles,) = [e for e in events if e["event"] == "roles"]
    assert roles["nodes"]["learner-0"] != roles["nodes"]["learner-1"], roles
    loaded = load_config(CONFIGS_DIR / preset, overrides(model_dir, tmp_path, shorter), environ={})
    check_preset_run(loaded, model_dir, run_dir)
