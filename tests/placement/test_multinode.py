"""Multi-node placement on one machine: several raylets with fake GPU/TPU resources (ray.cluster_utils).

The probe script runs in its own process with its own cluster (the test session's Ray stays apart);
it starts every role through ``driver.launch.start_roles`` with probe actors in place of the workers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).with_name("multinode_probe.py")


@pytest.fixture(scope="module")
def placed() -> dict:
    # The probe fakes 4 GPUs; a device mask this worker's process picked up (an in-process role's empty
    # CUDA_VISIBLE_DEVICES) would make Ray refuse them, so the probe starts without one.
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    out = subprocess.run([sys.executable, str(PROBE)], capture_output=True, text=True, timeout=420, env=env)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert out.returncode == 0 and lines, out.stdout[-3000:] + out.stderr[-3000:]
    return json.loads(lines[-1].removeprefix("RESULT "))


def test_four_gpu_preset_lands_rollout_on_1_gpu_actor_ref_on_2_reward_on_1(placed) -> None:
    actors = placed["four_gpu"]["actors"]
    assert placed["four_gpu"]["strategies"] == {"roles": "STRICT_PACK"}
    assert {a["node"] for a in actors.values()} == {placed["head"]}
    assert set(actors) == {"rollout-0", "actor_ref-0", "actor_ref-1", "reward-0", "learner-0"}
    assert all(name == a["name"] for name, a in actors.items())  # dashboard names read like the plan
    rollout, reward, learner = actors["rollout-0"], actors["reward-0"], actors["learner-0"]
    assert len(rollout["gpu_ids"]) == 1 and len(reward["gpu_ids"]) == 1 and len(learner["gpu_ids"]) == 2
    assert rollout["env"]["CUDA_VISIBLE_DEVICES"] == rollout["gpu_ids"][0]
    # actor_ref runs on the learner's two GPUs, one each; it reserves none itself
    borrowed = [actors[f"actor_ref-{r}"]["env"]["CUDA_VISIBLE_DEVICES"] for r in (0, 1)]
    assert borrowed == learner["gpu_ids"] and all(not actors[f"actor_ref-{r}"]["gpu_ids"] for r in (0, 1))
    assert len(set(rollout["gpu_ids"] + reward["gpu_ids"] + learner["gpu_ids"])) == 4
    assert learner["env"]["JAX_PLATFORMS"] == "cuda" and learner["env"]["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert all(a["env"]["OMP_NUM_THREADS"] == "4" for a in actors.values())


def test_a_second_job_is_refused_while_the_gpus_are_held(placed) -> None:
    text = placed["second_job"]
    assert text.startswith("not enough free GPU right now"), text
    assert "total GPU" in text and "learner-0" in text


def test_gpu_node_plus_two_tpu_hosts_puts_one_learner_on_each_tpu_node(placed) -> None:
    actors = placed["tpu"]["actors"]
    assert placed["tpu"]["strategies"] == {"roles": "STRICT_PACK", "learner": "STRICT_SPREAD"}
    learners = [actors["learner-0"], actors["learner-1"]]
    assert sorted(a["node"] for a in learners) == sorted(placed["tpu_hosts"])
    assert all(a["env"]["JAX_PLATFORMS"] == "tpu" and a["env"]["TPU_VISIBLE_CHIPS"] == "0,1,2,3" for a in learners)
    # both hosts join one JAX job: the same coordinator, on learner-0's node, and ranks 0 and 1
    dist = [a["distributed"] for a in learners]
    assert dist[0]["coordinator"] == dist[1]["coordinator"] and [d["process_id"] for d in dist] == [0, 1]
    assert all(d["num_processes"] == 2 for d in dist)
    others = [a for name, a in actors.items() if not name.startswith("learner")]
    assert {a["node"] for a in others} == {placed["head"]}
