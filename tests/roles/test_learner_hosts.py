"""Two learner actors (one per 'host') join one JAX distributed job, as the driver starts them.

Placement across hosts is covered by tests/placement/test_multinode.py; here both processes run on
this machine's Ray, each with 2 fake XLA CPU devices, and must see one job of 4 devices.
"""

from __future__ import annotations

import ray

from relay.config import load_config
from roles.env import runtime_env
from roles.launch import _coordinator_address, call
from roles.learner import LearnerWorker
from trainer import REPO


def test_learner_hosts_join_one_jax_job(ray_session, tiny_model_dir) -> None:
    loaded = load_config(
        REPO / "configs" / "tiny.yaml",
        [f"model.path={tiny_model_dir}", "learner.hosts=2", "learner.devices_per_host=2", "rollout.batch_size=4"],
        environ={},
    )
    c, derived = loaded.cfg, loaded.derived.as_dict()
    coordinator = ray.get(_coordinator_address.remote())
    actors = [
        ray.remote(LearnerWorker)
        .options(num_cpus=0.1, runtime_env=runtime_env(1, "cpu", jax_role=True, local_devices=2))
        .remote(
            str(tiny_model_dir),
            dict(c.train),
            dict(c.algorithm),
            derived,
            c.rollout.temperature,
            dict(c.learner),
            {"coordinator": coordinator, "num_processes": 2, "process_id": rank},
        )
        for rank in range(2)
    ]
    try:
        ready = call(["learner-0", "learner-1"], [a.ready.remote() for a in actors], "start-up")
    finally:
        for a in actors:
            ray.kill(a, no_restart=True)
    assert [r["process"]["index"] for r in ready] == [0, 1]
    assert all(r["process"]["count"] == 2 and r["process"]["devices"] == 4 for r in ready)
    assert all(len(r["devices"]) == 2 for r in ready)  # each host feeds its own 2 local devices
