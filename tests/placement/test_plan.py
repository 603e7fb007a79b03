"""The placement plan and its check against the cluster's resources (no Ray needed)."""

import pytest

from placement.plan import PlacementError, build_plan, check_fits
from relay.config import load_config


def test_one_bundle_per_role_with_its_cpus() -> None:
    plan = build_plan(load_config(overrides=["learner.resources.cpus=1.0"], environ={}).cfg)
    assert [b.role for b in plan.bundles] == ["rollout", "actor_ref", "reward", "learner"]
    assert plan.bundle_index("learner") == 3
    assert plan.totals() == {"CPU": 2.5}
    with pytest.raises(KeyError, match="no bundle for role 'critic'"):
        plan.bundle_index("critic")


def test_fits_exactly() -> None:
    plan = build_plan(load_config(environ={}).cfg)
    check_fits(plan, {"CPU": 2.0}, {"CPU": 2.0})


def test_shortfall_prints_table() -> None:
    plan = build_plan(load_config(overrides=["learner.resources.cpus=4"], environ={}).cfg)
    with pytest.raises(PlacementError) as err:
        check_fits(plan, {"CPU": 2.0}, {"CPU": 2.0})
    text = str(err.value)
    assert "more CPU than the cluster has" in text
    assert "learner[0]" in text and "CPU=4" in text and "total" in text and "CPU=5.5" in text


def test_busy_cluster_is_told_apart_from_small_cluster() -> None:
    plan = build_plan(load_config(environ={}).cfg)
    with pytest.raises(PlacementError, match="not enough free CPU right now"):
        check_fits(plan, {"CPU": 8.0}, {"CPU": 1.0})
