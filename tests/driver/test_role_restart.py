"""The restart ledger's arithmetic on Ray's actor-table entries: each restart is counted once, by Relay (a failed
call it recovered) or as Ray's alone (recovery/ray_restarts), whichever order the two are seen in. The live reading
of Ray's table is exercised in tests/driver/test_recovery.py."""

from __future__ import annotations

from driver.role_restart import RestartLedger


def _entry(restarts: int, pid: int, state: str = "ALIVE", node: str = "n1") -> dict:
    return {"NumRestarts": restarts, "Pid": pid, "State": state, "Address": {"NodeID": node}}


def test_a_restart_ray_made_alone_is_counted_and_its_process_recorded() -> None:
    ledger, info = RestartLedger(), {"reward-0": {"pid": 10, "node_id": "n1"}}
    assert ledger._read("reward-0", _entry(0, 10), info) == 0
    assert ledger._read("reward-0", _entry(1, 11, node="n2"), info) == 1
    assert info["reward-0"] == {"pid": 11, "node_id": "n2"}
    assert ledger._read("reward-0", _entry(1, 11, node="n2"), info) == 0  # read once


def test_a_restart_relay_made_is_not_counted_again() -> None:
    ledger, info = RestartLedger(), {}
    ledger.relay_restarted("rollout-0")
    assert ledger._read("rollout-0", _entry(1, 21), info) == 0
    assert ledger.by_relay == {} and info["rollout-0"]["pid"] == 21


def test_a_relay_restart_the_table_does_not_show_yet_stays_owed() -> None:
    ledger, info = RestartLedger(), {"rollout-0": {"pid": 20}}
    ledger.relay_restarted("rollout-0")
    assert ledger._read("rollout-0", _entry(0, 20), info) == 0  # read before Ray's restart
    assert ledger.by_relay == {"rollout-0": 1}
    assert ledger._read("rollout-0", _entry(2, 22), info) == 1  # Relay's, then one Ray made alone
    assert ledger.by_relay == {}


def test_an_actor_still_restarting_is_counted_but_keeps_its_record_until_alive() -> None:
    ledger, info = RestartLedger(), {"tools-0": {"pid": 30, "node_id": "n1"}}
    assert ledger._read("tools-0", _entry(1, 0, state="RESTARTING"), info) == 1
    assert info["tools-0"] == {"pid": 30, "node_id": "n1"}
    assert ledger._read("tools-0", None, info) == 0  # not in the table: nothing to read
