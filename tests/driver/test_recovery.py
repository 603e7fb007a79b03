"""A role actor killed during a run: Ray restarts it, it gets the current weights, the step is retried.

The transformers rollout engine keeps restarts cheap. Processes are killed with SIGKILL, as a crash
or an OOM kill would.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

import pytest
from transformers import AutoTokenizer

from driver.console import print_role_log_tail
from driver.launch import start_roles, stop_roles
from driver.role_group import RestartPolicy
from driver.step import run_step
from placement.plan import build_plan
from relay.config import load_config
from relay.grpo.kl_controller import KLController
from relay.repo import REPO_ROOT
from relay.run.logs import role_log_path, tail
from relay.tasks.prompt_source import PromptSource
from roles.role_call import RoleFailedError, call


@pytest.fixture(scope="module")
def running(ray_session, tiny_model_dir, tmp_path_factory):
    loaded = load_config(
        REPO_ROOT / "configs" / "tiny.yaml",
        [f"model.path={tiny_model_dir}", "rollout.engine=hf", "data.max_response_length=16", "trainer.role_restarts=2"],
        environ={},
    )
    run_dir = tmp_path_factory.mktemp("run")  # the quiet terminal's per-actor logs (relay.run.logs)
    roles = start_roles(loaded, build_plan(loaded.cfg), str(tiny_model_dir), log_dir=run_dir / "logs")
    roles.run_dir = run_dir
    prompts = PromptSource.from_config(loaded.cfg.data, AutoTokenizer.from_pretrained(tiny_model_dir), 4)
    yield loaded.cfg, roles, prompts
    stop_roles(roles)


def _pid(handle, name: str) -> int:
    return call([name], [handle.ready.remote()], "pid")[0]["pid"]


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def test_killed_rollout_actor_is_restarted_with_the_current_weights(running) -> None:
    cfg, roles, prompts = running
    run_step(
        roles, prompts.next_batch(), cfg, 0, KLController.from_config(cfg.algorithm)
    )  # after this the engines hold version-1 weights
    old = _pid(roles.rollout[0], "rollout-0")
    _kill(old)
    _, m = run_step(roles, prompts.next_batch(), cfg, 1, KLController.from_config(cfg.algorithm))
    # the death was seen either as a failed call (restarts) or as a restarted engine on old weights
    assert m["recovery/restarts"] + m.get("recovery/stale_rollouts", 0) >= 1
    assert _pid(roles.rollout[0], "rollout-0") != old
    # the samples came from the learner's current weights, not the initial checkpoint
    assert m["logprob_gap/rollout_vs_learner_max"] < 1e-4


def test_killed_reward_actor_mid_run_costs_nothing(running) -> None:
    """Killed between steps, the reward actor is restarted by Ray: either the next grading fails and Relay restarts
    it (recovery/restarts), or Ray queues that grading until the actor is back and no call fails; then only the
    actor's own report shows the restart (a new process incarnation), and the ledger counts it
    (recovery/ray_restarts). Either way, once, and the driver's record takes the new process's pid."""
    cfg, roles, prompts = running
    roles.ledger.notice(roles.handles(), roles.ready_info)  # the earlier tests' restarts read
    _kill(old := _pid(roles.reward[0], "reward-0"))
    _, m = run_step(roles, prompts.next_batch(), cfg, 2, KLController.from_config(cfg.algorithm))
    assert 0.0 <= m["reward/mean"] <= 1.0
    assert m["recovery/restarts"] + roles.ledger.notice(roles.handles(), roles.ready_info) == 1
    assert roles.ready_info["reward-0"]["pid"] == _pid(roles.reward[0], "reward-0") != old


def test_hung_reward_actor_is_killed_and_restarted(running) -> None:
    """A stopped process holds its resources and answers nothing: past trainer.role_call_timeout_s the group kills
    it, Ray restarts it and the grading is sent again."""
    cfg, roles, prompts = running
    hung = _pid(roles.reward[0], "reward-0")
    os.kill(hung, signal.SIGSTOP)
    before = roles.restart
    roles.restart = RestartPolicy(before.attempts, before.timeout_s, call_timeout_s=30.0)
    try:
        start = time.monotonic()
        _, m = run_step(roles, prompts.next_batch(), cfg, 3, KLController.from_config(cfg.algorithm))
    finally:
        roles.restart = before
        with contextlib.suppress(ProcessLookupError):
            os.kill(hung, signal.SIGKILL)
    assert m["recovery/restarts"] == 1 and 0.0 <= m["reward/mean"] <= 1.0
    assert _pid(roles.reward[0], "reward-0") != hung
    assert roles.ledger.notice(roles.handles(), roles.ready_info) == 0  # Relay's own restart, not Ray's alone
    assert time.monotonic() - start < 30.0 + cfg.trainer.role_restart_timeout_s


def test_learner_death_stops_the_step_with_its_name(running, capsys) -> None:
    cfg, roles, prompts = running
    _kill(_pid(roles.learner[0], "learner-0"))
    with pytest.raises(RoleFailedError, match="role 'learner-0' died during update") as err:
        run_step(roles, prompts.next_batch(), cfg, 4, KLController.from_config(cfg.algorithm))
    assert err.value.role == "learner" and err.value.died
    # what the trainer prints with the error: the dead actor's last log lines (its file survives it)
    log = role_log_path(roles.run_dir, "learner-0")
    assert log.is_file()
    print_role_log_tail(roles.run_dir, "learner-0")
    printed = capsys.readouterr().err.splitlines()
    lines = tail(log)
    assert printed == (
        [f"--- last {len(lines)} lines of {log} ---", *(f"  {ln}" for ln in lines), "---"] if lines else []
    )


def test_every_actor_writes_its_own_log(running) -> None:
    _, roles, _ = running
    logs = roles.run_dir / "logs"
    assert {p.name for p in logs.iterdir()} >= {"rollout-0.log", "reward-0.log", "learner-0.log"}
