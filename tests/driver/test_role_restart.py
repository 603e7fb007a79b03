"""The restart ledger's arithmetic on the actors' own reports: each restart is counted once, by Relay (a failed call
it recovered) or as Ray's alone (recovery/ray_restarts), whichever order the two are seen in. The live reading of
the reports is exercised in tests/driver/test_recovery.py."""

from __future__ import annotations

from driver.role_restart import RestartLedger


def _report(incarnation: str, pid: int, node: str = "n1") -> dict:
    return {"pid": pid, "node_id": node, "incarnation": incarnation}


def test_a_restart_ray_made_alone_is_counted_once_and_its_process_recorded() -> None:
    ledger, info = RestartLedger(), {"reward-0": {"pid": 10, "node_id": "n1", "incarnation": "a"}}
    assert ledger._read("reward-0", _report("a", 10), info) == 0
    assert ledger._read("reward-0", _report("b", 11, node="n2"), info) == 1
    assert info["reward-0"] == {"pid": 11, "node_id": "n2", "incarnation": "b"}
    assert ledger._read("reward-0", _report("b", 11, node="n2"), info) == 0  # read once


def test_a_new_process_is_told_by_its_incarnation_even_with_the_same_pid() -> None:
    """A restarted actor on another node may get the pid its predecessor had."""
    ledger, info = RestartLedger(), {"rollout-0": {"pid": 20, "node_id": "n1", "incarnation": "a"}}
    assert ledger._read("rollout-0", _report("b", 20, node="n2"), info) == 1


def test_a_restart_relay_made_is_not_counted_again() -> None:
    ledger, info = RestartLedger(), {"rollout-0": {"pid": 20, "incarnation": "a"}}
    ledger.relay_restarting("rollout-0")
    info["rollout-0"] = _report("b", 21)  # what Relay's restart recorded (Roles.recover)
    ledger.relay_restarted("rollout-0", "b")
    assert ledger._read("rollout-0", _report("b", 21), info) == 0
    assert ledger.by_relay == set()


def test_a_report_read_while_relay_restarts_the_actor_waits_for_relay() -> None:
    """The pipeline's collect thread restarts the actor while the driver reads: the new process's report arrives
    before Relay has recorded it, and is not judged until then."""
    ledger, info = RestartLedger(), {"rollout-0": {"pid": 20, "incarnation": "a"}}
    ledger.relay_restarting("rollout-0")
    assert ledger._read("rollout-0", _report("b", 21), info) == 0
    ledger.relay_restarted("rollout-0", "b")
    assert ledger._read("rollout-0", _report("b", 21), info) == 0  # Relay's: counted by recovery/restarts
    assert ledger._read("rollout-0", _report("c", 22), info) == 1  # then one Ray made alone


def test_a_relay_restart_that_failed_leaves_later_restarts_counted() -> None:
    ledger, info = RestartLedger(), {"tools-0": {"pid": 30, "incarnation": "a"}}
    ledger.relay_restarting("tools-0")
    ledger.relay_restarted("tools-0", None)  # the wait for Ray's restart timed out
    assert ledger.restarting == set() and ledger.by_relay == set()
    assert ledger._read("tools-0", _report("b", 31), info) == 1


def test_an_actor_first_read_takes_its_start_up_report_as_the_baseline() -> None:
    ledger = RestartLedger()
    info = {"reward-0": {"pid": 10, "incarnation": "a"}, "learner-0": {"pid": 11, "incarnation": "l"}}
    assert ledger._read("reward-0", _report("a", 10), info) + ledger._read("learner-0", _report("l", 11), info) == 0
