"""Two learner actors (one per 'host') join one JAX distributed job and update as one learner.

Placement across hosts is covered by tests/placement/test_multinode.py; here both processes run on
this machine's Ray, each with 2 fake XLA CPU devices (gloo collectives), as the driver starts them:
a coordinator address from a task, then every rank's constructor at once. Each host is sent its
share of the rows; after two updates on the same batch, the losses and the weights rank 0 publishes must equal
a single-process learner's. Both variants compute the reference log-probs in the learner (the KL loss of the
second update reads them): full fine-tuning with ``train.remat`` (layer-wise gradients) and LoRA (the reference
is the base, adapters off).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import ray

from benchmarks.harness.synthetic import synthetic_batch
from driver.launch import _coordinator_address
from relay.config import load_config
from relay.data_proto import DataProto
from relay.engines.lora_payload import adapter_payload
from relay.learner.inputs import LEARNER_INPUTS
from relay.learner.settings import LearnerSettings, build_jax_learner
from relay.repo import REPO_ROOT
from relay.rollout_batch import split_rows
from roles.env import runtime_env
from roles.learner import JaxJob, LearnerWorker
from roles.role_call import call

P, R = 8, 8
VARIANTS = {"full": ["train.remat=true"], "lora": ["model.lora.rank=4", "model.lora.target_modules=[q_proj,down_proj]"]}
# float32 sums in another order (two hosts' gradients reduced across processes): measured about 1e-8 on the weights.
WEIGHT_ATOL = 1e-6


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def two_hosts(request, ray_session, tiny_model_dir):
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
            "algorithm.ref_log_prob_source=learner",
            "algorithm.kl_loss_coef=0.5",
            *VARIANTS[request.param],
        ],
        environ={},
    )
    derived = loaded.derived.as_dict()
    assert derived["reference_in_learner"]
    settings = LearnerSettings.from_config(loaded.cfg, derived)
    coordinator = ray.get(_coordinator_address.remote())
    actors = [
        ray.remote(LearnerWorker)
        .options(num_cpus=0.1, runtime_env=runtime_env(1, "cpu", jax_role=True, local_devices=2))
        .remote(str(tiny_model_dir), settings, JaxJob(coordinator, 2, rank))
        for rank in range(2)
    ]
    ready = call(["learner-0", "learner-1"], [a.ready.remote() for a in actors], "start-up")
    yield request.param, settings, actors, ready
    for a in actors:
        ray.kill(a, no_restart=True)


def test_learner_hosts_join_one_jax_job(two_hosts) -> None:
    *_, ready = two_hosts
    assert [r["process"]["index"] for r in ready] == [0, 1]
    assert all(r["process"]["count"] == 2 and r["process"]["devices"] == 4 for r in ready)
    assert all(len(r["devices"]) == 2 for r in ready)  # each host feeds its own 2 local devices


def _single_process(model_dir: str, settings: LearnerSettings):
    """The same learner in this process on one device, fed every row (twice the per-host batch sizes)."""
    one = replace(
        settings,
        micro_batch_size=settings.micro_batch_size * 2,
        mini_batch_sequences=settings.mini_batch_sequences * 2,
        mesh={"dp": 1},
    )
    return build_jax_learner(model_dir, one)


def test_two_host_updates_equal_the_single_process_updates(two_hosts, tiny_model_dir) -> None:
    variant, settings, actors, _ = two_hosts
    arrays = synthetic_batch(16, P, R, vocab=49152, seed=5)
    batch = DataProto.from_dict(batch=arrays, meta_info={"prompt_length": P})
    single = _single_process(str(tiny_model_dir), settings)
    assert single.layerwise == (variant == "full") and single.loss_settings.ref_in_learner
    for update in range(2):  # the second update's KL loss reads the learner's reference: the policy has moved
        train = batch.select([k for k in LEARNER_INPUTS if k in arrays], [])
        refs = [a.update.remote(train[s]) for a, s in zip(actors, split_rows(len(train), len(actors)), strict=True)]
        (weights_ref, m0), (none_ref, m1) = call(["learner-0", "learner-1"], refs, "update")
        assert none_ref is None and weights_ref is not None  # only rank 0 publishes
        assert m0["actor/loss"] == pytest.approx(m1["actor/loss"], rel=1e-6)  # one global loss
        assert m0["learner/ref_forward"] == 1.0
        metrics = single.update(arrays, P)
        assert metrics["actor/loss"] == pytest.approx(m0["actor/loss"], rel=1e-5, abs=1e-6), update
        # The first update's policy is the reference (KL 0); the second one's has moved away from it.
        assert metrics["actor/kl"] > 0 if update else metrics["actor/kl"] < 1e-9
    multi = ray.get(weights_ref)
    after = single.export_hf() if variant == "full" else adapter_payload(single.export_adapters(), single.lora.scaling)
    assert sorted(multi) == sorted(after)
    diff = max(float(np.abs(np.asarray(multi[k]) - np.asarray(after[k])).max()) for k in after)
    assert diff < WEIGHT_ATOL, diff
