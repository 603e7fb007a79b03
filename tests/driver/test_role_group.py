"""What a role group does without actors: names, weight holders, the stacking of rank shares, and which failures
it recovers from (the calls themselves: tests/driver/test_step.py, test_recovery.py, test_tools_recovery.py)."""

from __future__ import annotations

import numpy as np

from driver.role_group import RestartPolicy, Roles, stack_rows
from relay.data_proto import DataProto
from roles.role_call import RoleFailedError


def _roles(actor_copy: bool = False, attempts: int = 2) -> Roles:
    roles = Roles(plan=None, placement_groups={}, actor_copy=actor_copy, restart=RestartPolicy(attempts, 1.0))
    for role, count in (("rollout", 2), ("actor_ref", 1), ("reward", 1), ("learner", 1)):
        roles.group(role).handles.extend(object() for _ in range(count))
    return roles


def test_one_place_names_every_actor() -> None:
    roles = _roles()
    assert roles.rollout.names == ["rollout-0", "rollout-1"]
    assert list(roles.handles()) == ["rollout-0", "rollout-1", "actor_ref-0", "reward-0", "learner-0"]
    assert len(roles.group("tools")) == 0 and "tools-0" not in roles.handles()


def test_weight_holders_are_the_rollout_and_an_actor_copy() -> None:
    assert _roles().weight_holder_names() == ["rollout-0", "rollout-1"]
    assert _roles(actor_copy=True).weight_holder_names() == ["rollout-0", "rollout-1", "actor_ref-0"]


def test_rank_shares_stack_in_order_with_the_stalest_version() -> None:
    parts = [
        DataProto.from_dict(batch={"x": np.array([1, 2])}, meta_info={"weights_version": 3, "metrics": {"a": 1.0}}),
        DataProto.from_dict(batch={"x": np.array([3])}, meta_info={"weights_version": 2, "metrics": {"a": 3.0}}),
    ]
    out = stack_rows(parts)
    np.testing.assert_array_equal(out.batch["x"], [1, 2, 3])
    assert out.meta_info["weights_version"] == 2
    assert out.meta_info["metrics"] == {"a": 2.0}  # neither timing, memory nor throughput: the ranks' mean


def test_only_a_restartable_role_s_death_within_the_attempts_is_recovered() -> None:
    roles = _roles(attempts=1)
    assert not roles.recover(RoleFailedError("raised", "rollout-0", died=False), 0)  # a bug, not a death
    assert not roles.recover(RoleFailedError("died", "learner-0", died=True), 0)  # its state would be lost
    assert not roles.recover(RoleFailedError("died", "rollout-0", died=True), 1)  # attempts used up
    assert roles.restarted == []
