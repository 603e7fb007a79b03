"""Placement groups on the session's Ray: a group that cannot be placed times out with the table."""

import time

import pytest
import ray

from placement.group import create_placement_groups
from placement.plan import PlacementError, build_plan
from relay.config import load_config


def test_pending_group_times_out_with_the_table_and_is_removed(ray_session) -> None:
    plan = build_plan(load_config(overrides=["learner.resources.cpus=64"], environ={}).cfg)
    start = time.monotonic()
    with pytest.raises(PlacementError, match=r"placement group 'roles' not ready after 2s") as err:
        # skip the up-front check, as if another job took the CPUs between the check and the request
        create_placement_groups(plan, timeout_s=2.0, prefix="relay-timeout-test", check=False)
    assert time.monotonic() - start < 30
    assert "learner-0" in str(err.value) and "total CPU" in str(err.value)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        table = ray.util.placement_group_table()
        live = [g for g in table.values() if g["name"].startswith("relay-timeout-test") and g["state"] != "REMOVED"]
        if not live:
            break
        time.sleep(0.2)
    assert not live
