"""Two learner actors (one per 'host') join one JAX distributed job and update as one learner.

Placement across hosts is covered by tests/placement/test_multinode.py; here both processes run on
this machine's Ray, each with 2 fake XLA CPU devices (gloo collectives), as the driver starts them:
a coordinator address from a task, then every rank's constructor at once. Each host is sent its
share of the rows; the weights rank 0 publishes must equal a single-process update of all rows.
"""

from __future__ import annotations

import numpy as np
import pytest
import ray
from omegaconf import OmegaConf

from benchmarks.synthetic import synthetic_batch
from driver import fanout
from driver.launch import _coordinator_address, call
from driver.step import LEARNER_INPUTS
from relay.config import load_config
from relay.data_proto import DataProto
from relay.learner.grpo_loss import LossSettings
from relay.learner.learner import JaxLearner
from relay.repo import REPO_ROOT
from roles.env import runtime_env
from roles.learner import LearnerWorker

P, R = 8, 8


@pytest.fixture(scope="module")
def two_hosts(ray_session, tiny_model_dir):
    loaded = load_config(
        REPO_ROOT / "configs" / "tiny.yaml",
        [
            f"model.path={tiny_model_dir}",
            "learner.hosts=2",
            "learner.devices_per_host=2",
            "learner.mesh={dp: 2, fsdp: 2, tp: 1}",
            "rollout.batch_size=4",
            "rollout.n=4",
            "train.micro_batch_size=4",
            "train.optimizer.name=sgd",
            "train.optimizer.lr_schedule.peak_value=0.5",
        ],
        environ={},
    )
    c = OmegaConf.to_container(loaded.cfg, resolve=True)
    derived = loaded.derived.as_dict()
    coordinator = ray.get(_coordinator_address.remote())
    actors = [
        ray.remote(LearnerWorker)
        .options(num_cpus=0.1, runtime_env=runtime_env(1, "cpu", jax_role=True, local_devices=2))
        .remote(
            str(tiny_model_dir),
            c["train"],
            c["algorithm"],
            derived,
            c["rollout"]["temperature"],
            c["learner"],
            {"coordinator": coordinator, "num_processes": 2, "process_id": rank},
        )
        for rank in range(2)
    ]
    ready = call(["learner-0", "learner-1"], [a.ready.remote() for a in actors], "start-up")
    yield loaded, c, derived, actors, ready
    for a in actors:
        ray.kill(a, no_restart=True)


def test_learner_hosts_join_one_jax_job(two_hosts) -> None:
    *_, ready = two_hosts
    assert [r["process"]["index"] for r in ready] == [0, 1]
    assert all(r["process"]["count"] == 2 and r["process"]["devices"] == 4 for r in ready)
    assert all(len(r["devices"]) == 2 for r in ready)  # each host feeds its own 2 local devices


def test_two_host_update_equals_the_single_process_update(two_hosts, tiny_model_dir) -> None:
    loaded, c, derived, actors, _ = two_hosts
    arrays = synthetic_batch(16, P, R, vocab=49152, seed=5)
    batch = DataProto.from_dict(batch=arrays, meta_info={"prompt_length": P})
    refs = fanout.submit_shares(actors, "update", batch.select([k for k in LEARNER_INPUTS if k in arrays], []))
    (m0, weights_ref), (m1, none_ref) = call(["learner-0", "learner-1"], refs, "update")
    assert none_ref is None and weights_ref is not None  # only rank 0 publishes
    assert m0["actor/loss"] == pytest.approx(m1["actor/loss"], rel=1e-6)  # one global loss
    multi = ray.get(weights_ref)

    single = JaxLearner(
        str(tiny_model_dir),
        c["train"]["optimizer"],
        # the two-host learners' settings: with several hosts the reference comes in the batch (reference_in_learner)
        LossSettings.from_config(c["algorithm"], derived, c["rollout"]["temperature"]),
        micro_batch_size=8,
        mesh={"dp": 1},
    )
    before = single.export_hf()
    before = {k: np.array(v) for k, v in before.items()}
    metrics = single.update(arrays, P)
    after = single.export_hf()
    assert metrics["actor/loss"] == pytest.approx(m0["actor/loss"], rel=1e-5, abs=1e-6)
    diff = max(float(np.abs(multi[k] - after[k]).max()) for k in after)
    update = max(float(np.abs(after[k] - before[k]).max()) for k in after)
    assert diff < 1e-6 < update, (diff, update)
