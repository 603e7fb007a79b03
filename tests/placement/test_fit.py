"""The fit check: bundle by bundle against each node's totals, then against what is free now."""

import pytest

from placement.cluster import declared_nodes, this_machine
from placement.fit import check_fits, plan_for, resolve_strategy
from placement.nodes import NodeView
from placement.plan import GIB, PlacementError, build_plan
from relay.config import load_config
from relay.repo import REPO_ROOT

CONFIGS = REPO_ROOT / "configs"


def _cfg(overrides=(), preset="default.yaml"):
    return load_config(CONFIGS / preset, list(overrides), environ={}).cfg


def _node(name, free=None, **total):
    return NodeView(name, total, free if free is not None else dict(total))


def test_default_fits_this_two_core_machine() -> None:
    where = check_fits(build_plan(_cfg()), [_node("n0", CPU=2.0)])
    assert set(where.values()) == {0} and len(where) == 3  # rollout, reward, learner (the learner's reference)
    where = check_fits(build_plan(_cfg(["algorithm.ref_log_prob_source=actor_ref"])), [_node("n0", CPU=2.0)])
    assert set(where.values()) == {0} and len(where) == 4


def test_shortfall_prints_a_table_per_actor() -> None:
    plan = build_plan(_cfg(["learner.resources.cpus=4"]))  # rollout, reward, learner: 5 CPUs
    with pytest.raises(PlacementError) as err:
        check_fits(plan, [_node("n0", CPU=2.0)])
    text = str(err.value)
    assert "more CPU than the cluster has" in text and "Fix:" in text
    assert "learner-0" in text and "CPU=4" in text and "total CPU            5 " in text
    assert "n0: has CPU=2" in text


def test_busy_cluster_is_told_apart_from_small_cluster() -> None:
    plan = build_plan(_cfg())
    with pytest.raises(PlacementError, match="not enough free CPU right now"):
        check_fits(plan, [_node("n0", free={"CPU": 1.0}, CPU=8.0)])


def test_gpus_held_by_another_job() -> None:
    cfg = _cfg(preset="gsm8k_qwen25_3b_4gpu.yaml")
    node = _node("gpu-node", free={"CPU": 32.0, "GPU": 0.0}, CPU=32.0, GPU=4.0)
    with pytest.raises(PlacementError, match="not enough free GPU right now") as err:
        check_fits(plan_for(cfg, [node]), [node])
    assert "ray list placement-groups" in str(err.value)


def test_a_bundle_never_spans_nodes() -> None:
    """Two 1-GPU nodes hold 2 GPUs in total, but not the learner's 2-GPU bundle."""
    cfg = _cfg(["learner.accelerator=gpu", "learner.devices_per_host=2", "train.micro_batch_size=2"])
    nodes = [_node("a", CPU=2.0, GPU=1.0), _node("b", CPU=2.0, GPU=1.0)]
    plan = plan_for(cfg, nodes)
    assert plan.group("roles").strategy == "PACK"  # no single node holds the group
    with pytest.raises(PlacementError, match=r"bundle 2 \(CPU=0.5, GPU=2\) fits no node"):
        check_fits(plan, nodes)


def test_four_gpu_preset_on_one_node_and_on_two() -> None:
    cfg = _cfg(preset="gsm8k_qwen25_3b_4gpu.yaml")
    one = declared_nodes(_cfg(["cluster.nodes=1", "cluster.gpus_per_node=4", "cluster.cpus_per_node=32"]).cluster)
    plan = plan_for(cfg, one)
    assert plan.group("roles").strategy == "STRICT_PACK" and set(check_fits(plan, one).values()) == {0}
    two = [_node("a", CPU=16.0, GPU=2.0), _node("b", CPU=16.0, GPU=2.0)]
    plan = plan_for(cfg, two)
    assert plan.group("roles").strategy == "PACK"
    where = check_fits(plan, two)
    assert sorted(where.values()) == [0, 0, 1]  # rollout + reward on one node, the 2-GPU bundle on the other


def test_gpu_node_plus_two_tpu_hosts() -> None:
    cfg = _cfg(preset="gsm8k_qwen25_7b_tpu_2host.yaml")
    nodes = declared_nodes(
        _cfg(
            [
                "cluster.nodes=1",
                "cluster.gpus_per_node=4",
                "cluster.cpus_per_node=32",
                "cluster.tpu_hosts=2",
                "cluster.tpus_per_host=4",
            ]
        ).cluster
    )
    where = check_fits(plan_for(cfg, nodes), nodes)
    assert {where[("learner", 0)], where[("learner", 1)]} == {1, 2}  # one learner host per TPU node
    assert {where[("roles", b)] for b in range(4)} == {0}


def test_two_tpu_learner_hosts_need_two_tpu_nodes() -> None:
    cfg = _cfg(preset="gsm8k_qwen25_7b_tpu_2host.yaml")
    nodes = [_node("gpu", CPU=32.0, GPU=4.0), _node("tpu", CPU=16.0, TPU=8.0)]  # 8 chips, but on one host
    with pytest.raises(PlacementError, match="on a node of its own"):
        check_fits(plan_for(cfg, nodes), nodes)


def test_memory_reservations_are_checked() -> None:
    plan = build_plan(_cfg(["learner.resources.memory_gib=100"]))
    with pytest.raises(PlacementError, match="more memory than the cluster has") as err:
        check_fits(plan, [_node("n0", CPU=2.0, memory=64.0 * GIB)])
    assert "100GiB" in str(err.value)


def test_no_nodes_and_strategy_resolution() -> None:
    with pytest.raises(PlacementError, match="no alive nodes"):
        check_fits(build_plan(_cfg()), [])
    assert resolve_strategy({"CPU": 2.0}, [_node("n", CPU=2.0)]) == "STRICT_PACK"
    assert resolve_strategy({"CPU": 3.0}, [_node("n", CPU=2.0), _node("m", CPU=2.0)]) == "PACK"


def test_nodes_carry_their_ram_for_the_memory_check() -> None:
    (here,) = this_machine()
    assert here.ram_bytes > here.total["memory"] and here.ram_source == "total RAM of this machine"
    nodes = declared_nodes(_cfg(["cluster.nodes=1", "cluster.memory_gib_per_node=32", "cluster.tpu_hosts=1"]).cluster)
    assert [(n.ram_bytes, n.ram_source) for n in nodes] == [
        (32.0 * GIB, "cluster.memory_gib_per_node"),
        (64.0 * GIB, "cluster.memory_gib_per_tpu_host"),
    ]
    assert _node("n0", CPU=2.0).ram_bytes is None  # unknown: the memory check falls back to Ray's memory or skips
