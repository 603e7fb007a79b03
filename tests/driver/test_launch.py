"""Role start-up and failure: refused plans and dead actors become clear errors, never hangs."""

import time

import pytest
import ray

from driver.launch import start_roles
from placement.plan import PlacementError, actor_name, build_plan
from relay.config import load_config
from relay.data_proto import DataProto
from roles.reward import RewardSettings, RewardWorker
from roles.role_call import RoleFailedError, call, killed_for_memory


def _reward_actor():
    cfg = load_config(overrides=["reward.workers=0"], environ={}).cfg
    return ray.remote(RewardWorker).options(num_cpus=0.1).remote(RewardSettings.from_section(dict(cfg.reward)))


def test_plan_larger_than_cluster_is_refused_before_any_actor(ray_session, tiny_model_dir) -> None:
    loaded = load_config(overrides=[f"model.path={tiny_model_dir}", "learner.resources.cpus=64"], environ={})
    free_before = ray.available_resources().get("CPU", 0.0)
    with pytest.raises(PlacementError, match=r"more CPU than the cluster has"):
        start_roles(loaded, build_plan(loaded.cfg), str(tiny_model_dir))
    assert ray.available_resources().get("CPU", 0.0) == free_before  # no group, no actor took anything
    live_groups = [g for g in ray.util.placement_group_table().values() if g["state"] != "REMOVED"]
    assert not live_groups  # no placement group was created


def test_dead_role_is_named(ray_session) -> None:
    actor = _reward_actor()
    call(["reward"], [actor.ready.remote()], "start-up")
    ray.kill(actor, no_restart=True)  # asynchronous: a call may still slip in before the kill lands
    deadline = time.monotonic() + 30
    with pytest.raises(RoleFailedError, match="role 'reward' died during scoring"):
        while time.monotonic() < deadline:
            call(["reward"], [actor.ready.remote()], "scoring")
            time.sleep(0.1)


def test_failing_role_is_named(ray_session) -> None:
    actor = _reward_actor()
    try:
        with pytest.raises(RoleFailedError, match="role 'reward' failed during scoring: .*KeyError"):
            call(["reward"], [actor.score.remote(DataProto.from_dict(non_tensor={"x": [1]}))], "scoring")
    finally:
        ray.kill(actor, no_restart=True)


def test_a_memory_kill_is_told_apart_from_a_crash() -> None:
    oom = ray.exceptions.RayActorError(error_msg="The actor died because its worker was killed due to memory pressure")
    assert killed_for_memory(oom)
    assert killed_for_memory(ray.exceptions.OutOfMemoryError("Task was killed due to the node running low on memory"))
    assert not killed_for_memory(ray.exceptions.RayActorError(error_msg="The actor died unexpectedly (exit code 1)"))
    learner = actor_name("learner", 0)
    failed = RoleFailedError("role 'learner-0' was killed for memory during update", learner, True, oom=True)
    assert (failed.role, failed.died, failed.oom) == ("learner", True, True)


def test_weight_sync_resolves_from_the_nodes_roles_reported() -> None:
    """auto: a memory file when every weight holder is on learner-0's node, the object store otherwise (or when
    a role reported no node); shared_memory across nodes is refused naming the actor elsewhere."""
    from driver.launch import resolve_weight_sync
    from driver.role_group import Roles

    def roles(rollout_node: str | None, actor_copy: bool = False, actor_node: str = "n1") -> Roles:
        r = Roles(plan=None, placement_groups={}, actor_copy=actor_copy)
        r.rollout.handles.append(object())
        r.actor_ref.handles.append(object())
        r.ready_info = {"learner-0": {"node_id": "n1"}, "actor_ref-0": {"node_id": actor_node}}
        r.ready_info["rollout-0"] = {"node_id": rollout_node} if rollout_node else {}
        return r

    assert resolve_weight_sync("auto", roles("n1")) == "shared_memory"
    assert resolve_weight_sync("auto", roles("n1", actor_node="n2")) == "shared_memory"  # a ref-only actor_ref
    assert resolve_weight_sync("auto", roles("n1", actor_copy=True, actor_node="n2")) == "object_store"
    assert resolve_weight_sync("auto", roles(None)) == "object_store"
    assert resolve_weight_sync("object_store", roles("n1")) == "object_store"
    with pytest.raises(ValueError, match="rollout-0 did not report the learner's node"):
        resolve_weight_sync("shared_memory", roles("n2"))
