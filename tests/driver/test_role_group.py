"""What a role group does without actors: names, each role's group kind, weight holders, and which failures it
recovers from (the calls themselves: tests/driver/test_step.py, test_recovery.py, test_tools_recovery.py)."""

from __future__ import annotations

from driver.role_calls import ActorRefGroup, LearnerGroup, RewardGroup, RolloutGroup
from driver.role_group import RestartPolicy, RoleGroup, Roles
from placement.plan import actor_name
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


def test_each_role_has_its_group_kind() -> None:
    roles = _roles()
    kinds = [type(g) for g in (roles.rollout, roles.actor_ref, roles.reward, roles.learner, roles.tools)]
    assert kinds == [RolloutGroup, ActorRefGroup, RewardGroup, LearnerGroup, RoleGroup]
    assert roles.rollout is roles.group("rollout")  # made once, read through either door


def test_weight_holders_are_the_rollout_and_an_actor_copy() -> None:
    assert _roles().weight_holder_names() == ["rollout-0", "rollout-1"]
    assert _roles(actor_copy=True).weight_holder_names() == ["rollout-0", "rollout-1", "actor_ref-0"]


def test_only_a_restartable_role_s_death_within_the_attempts_is_recovered() -> None:
    roles = _roles(attempts=1)
    rollout, learner = actor_name("rollout", 0), actor_name("learner", 0)
    assert not roles.recover(RoleFailedError("raised", rollout, died=False), 0)  # a bug, not a death
    assert not roles.recover(RoleFailedError("died", learner, died=True), 0)  # its state would be lost
    assert not roles.recover(RoleFailedError("died", rollout, died=True), 1)  # attempts used up
    assert roles.restarted == []
