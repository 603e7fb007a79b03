"""Place every role of a preset on a fake multi-node Ray cluster through the real start-up path.

Run by ``test_multinode.py`` in its own process (it starts its own raylets, apart from the test
session's Ray). One head node with 4 fake GPUs and 32 CPUs, and two TPU hosts with 4 fake chips
each, all on this machine (``ray.cluster_utils.Cluster``). Each role's class is replaced by a probe
actor that reports where it landed and the device environment it was given; everything else
(plan, fit check, placement groups, bundle GPU ids for colocation, the JAX coordinator, actor
names and runtime environments) is the code ``trainer.py`` runs. Prints one JSON document.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

import ray
from ray.cluster_utils import Cluster

from relay.repo import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))

from driver.launch import start_roles, stop_roles  # noqa: E402
from placement.cluster import ray_nodes  # noqa: E402
from placement.fit import plan_for  # noqa: E402
from placement.plan import PlacementError  # noqa: E402
from relay.config import load_config  # noqa: E402

ENV_KEYS = (
    "CUDA_VISIBLE_DEVICES",
    "TPU_VISIBLE_CHIPS",
    "JAX_PLATFORMS",
    "OMP_NUM_THREADS",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
)


class Probe:
    """Stands in for a role's worker: takes its constructor arguments, reports its placement."""

    def __init__(self, *args: object) -> None:
        # The learner's constructor args hold its place in the JAX job (driver.role_settings.learner_settings).
        job = next((a for a in args if type(a).__name__ == "JaxJob"), None)
        self.distributed = None if job is None else dataclasses.asdict(job)

    def ready(self) -> dict:
        ctx = ray.get_runtime_context()
        return {
            "node": ctx.get_node_id(),
            "name": ctx.get_actor_name(),
            "gpu_ids": [str(i) for i in ray.get_gpu_ids()],
            "env": {k: os.environ.get(k) for k in ENV_KEYS},
            "distributed": self.distributed,
        }


def place(preset: str, overrides: list[str], run_id: str) -> tuple[dict, object]:
    loaded = load_config(REPO_ROOT / "configs" / preset, overrides, environ={})
    plan = plan_for(loaded.cfg, ray_nodes())
    classes = dict.fromkeys(("rollout", "actor_ref", "reward", "learner"), Probe)
    roles = start_roles(loaded, plan, "unused-model-path", run_id=run_id, classes=classes)
    named = roles.handles()
    reports = dict(zip(named, ray.get([h.ready.remote() for h in named.values()]), strict=True))
    strategies = {g.name: g.strategy for g in plan.groups}
    return {"actors": reports, "strategies": strategies}, roles


def main() -> None:
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 32, "num_gpus": 4, "object_store_memory": 100 * 2**20},
    )
    tpu_hosts = [cluster.add_node(num_cpus=8, resources={"TPU": 4}, object_store_memory=100 * 2**20) for _ in range(2)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    result: dict = {"head": cluster.head_node.node_id, "tpu_hosts": [n.node_id for n in tpu_hosts]}
    try:
        result["four_gpu"], held = place("gsm8k_qwen25_3b_4gpu.yaml", [], "four-gpu")
        try:  # a second job while the first holds every GPU: refused with the table, no hang
            place("gsm8k_qwen25_3b_4gpu.yaml", ["placement.timeout_s=20"], "second-job")
            result["second_job"] = "started"
        except PlacementError as exc:
            result["second_job"] = str(exc)
        stop_roles(held)
        result["tpu"], held = place("gsm8k_qwen25_7b_tpu_2host.yaml", [], "tpu")
        stop_roles(held)
    finally:
        ray.shutdown()
        cluster.shutdown()
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
