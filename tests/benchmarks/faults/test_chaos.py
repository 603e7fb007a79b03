"""The fault-injection campaign: a seed draws the same faults every time, the verdict reads the runs, and a seeded
two-fault campaign on the tiny model earning the toy reward (its weights move at every step: a reward actor killed
while grading, a checkpoint damaged after a driver kill) ends every run equal to the undisturbed one, while two
known-bad recoveries (benchmarks/faults/mutations.py) on the same job end "failed"; a campaign with hangs (a rollout
killed mid-generation, a learner stopped in its update), a rollout killed in validation and a sync failing for good
are marked slow."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest

from benchmarks.faults import chaos
from benchmarks.faults import draw as chaos_draw
from benchmarks.faults import verdict as chaos_verdict
from benchmarks.faults.draw import available_points, draw_campaign
from benchmarks.faults.mutations import pythonpath
from benchmarks.faults.report import Injection, Outcome, main, mutation_report, read_outcomes, report
from benchmarks.faults.verdict import delivery_note, explains_exit, no_effect_reason
from benchmarks.harness.toy_reward import TOY_REWARD_OVERRIDES
from relay.faults import Fault


def test_the_docstring_examples_hold() -> None:
    assert doctest.testmod(chaos).failed == 0
    assert doctest.testmod(chaos_draw).failed == 0
    assert doctest.testmod(chaos_verdict).failed == 0


def test_a_campaign_run_ends_by_its_step_count_not_by_the_clock() -> None:
    """The arithmetic presets stop at 15 minutes (``trainer.time_budget_minutes``); a campaign's reference slowed by
    other work would end a step early and every faster run would differ from it by a row."""
    from relay.config import load_config
    from relay.repo import CONFIGS_DIR

    preset = CONFIGS_DIR / "arithmetic_smollm2.yaml"
    assert load_config(preset, []).cfg.trainer.time_budget_minutes == 15
    overrides = chaos.job_overrides(None, steps=3, call_timeout_s=120.0)
    cfg = load_config(preset, list(overrides)).cfg
    assert cfg.trainer.time_budget_minutes is None and cfg.trainer.total_training_steps == 3


def test_a_seed_draws_the_same_faults_and_another_seed_others(tmp_path) -> None:
    points = available_points({"rollout", "reward", "learner"}, validation=True)
    first = draw_campaign(2, 3, 3, points, tmp_path)
    assert first == draw_campaign(2, 3, 3, points, tmp_path)
    assert [(i.fault.point, i.fault.action, i.fault.step, i.corruption) for i in first] == [
        ("rollout.generate", "kill", 0, None),
        ("learner.update", "stop", 2, None),
        ("driver.between_steps", "kill", 2, "flip"),
    ]
    assert first[0].fault.campaign == "seed 2, fault 1 of 3"
    assert draw_campaign(3, 3, 3, points, tmp_path) != first


def test_a_node_loss_campaign_draws_node_faults_on_roles_points_only(tmp_path) -> None:
    points = available_points({"rollout", "reward", "learner"}, validation=False)
    assert not {"kill_node", "stop_node"} & {i.fault.action for i in draw_campaign(5, 40, 3, points, tmp_path)}
    mixed = draw_campaign(5, 40, 3, points, tmp_path, node_loss=True)
    for action in ("kill_node", "stop_node"):
        lost = {i.fault.point for i in mixed if i.fault.action == action}
        assert lost and lost <= set(chaos_draw.NODE_LOSS_POINTS)  # never the driver's or a checkpoint's point
    only = draw_campaign(5, 12, 3, points, tmp_path, node_loss=True, actions=("kill_node",))
    assert {(i.fault.action, i.corruption) for i in only} == {("kill_node", None)}
    assert {i.fault.point for i in only} <= {"rollout.generate", "reward.score", "learner.update"}


def test_a_campaign_on_chosen_points_draws_only_them(tmp_path) -> None:
    only = draw_campaign(4, 16, 3, ["actor_ref.compute_log_probs"], tmp_path)
    assert {(i.fault.point, i.corruption) for i in only} == {("actor_ref.compute_log_probs", None)}
    assert {i.fault.action for i in only} == {"kill", "stop"}


def test_a_campaign_on_the_presets_cadence_draws_checkpoint_faults_where_it_saves(tmp_path) -> None:
    """With a checkpoint only at the end (``trainer.save_freq=-1``, the presets' default) the checkpoints' points are
    drawn at the last step, the one the undisturbed run saved at, and no checkpoint is damaged (none to resume)."""
    points = available_points({"rollout", "reward", "learner"}, validation=False)
    final_only = {"driver.checkpoint": {3: 0.0}, "learner.save_checkpoint": {3: 0.0}}
    drawn = draw_campaign(7, 60, 3, points, tmp_path, spans=final_only)
    assert {i.fault.step for i in drawn if i.fault.point in chaos_draw.CHECKPOINT_POINTS} == {3}
    assert not any(i.corruption for i in drawn)
    every_step = {p: {1: 0.0, 2: 0.0, 3: 0.0} for p in final_only}
    assert any(i.corruption for i in draw_campaign(7, 60, 3, points, tmp_path, spans=every_step))


def test_an_in_recovery_campaign_follows_each_kill_into_its_recovery(tmp_path) -> None:
    points = available_points({"rollout", "reward", "learner"}, validation=False)
    drawn = chaos_draw.draw_in_recovery(6, 24, 3, points, tmp_path)
    assert drawn == chaos_draw.draw_in_recovery(6, 24, 3, points, tmp_path)
    pairs = {(i.fault.point, i.follow_up.point) for i in drawn}
    assert pairs == {(a, b) for a, b, _ in chaos_draw.recovery_pairs(points, 3)}  # 24 draws meet all five
    for i in drawn:
        assert i.follow_up.after == i.fault.marker and i.follow_up.marker != i.fault.marker
        assert i.follow_up.step == i.fault.step - (i.follow_up.point == "rollout.load_weights")
        assert i.fault.step >= 1 or i.follow_up.point == i.fault.point  # a resume needs a checkpoint to load


def test_a_pairs_record_reads_back_with_its_second_fault(tmp_path) -> None:
    from dataclasses import asdict

    first = Fault("driver.between_steps", 2, "kill", "/m")
    second = Fault("learner.load_checkpoint", 2, "kill", "/m2", after="/m")
    equal = dict(digest_equal=True, weights_equal=True, optimizer_steps_equal=True, cursor_equal=True)
    outcome = Outcome(Injection(0, first, follow_up=second), [1, 1, 0], fired=True, **equal)
    record = tmp_path / "chaos.jsonl"
    record.write_text(json.dumps({**asdict(outcome), "recovered_by": outcome.recovered_by}) + "\n")
    assert read_outcomes(record) == [outcome]
    assert report([outcome])[-1] == (
        "| driver.between_steps | kill, then kill in learner.load_checkpoint | 1 | 0 | 1 | 0 | 0 | 0 | 0 |"
    )


def test_an_exit_1_must_say_why_and_how_to_resume() -> None:
    assert explains_exit("error: checkpoint step_000003 could not be written: ...\nno checkpoint to resume from")
    assert explains_exit("error: role 'rollout-0' ...\nsaved X; continue with: python trainer.py --resume R")
    assert not explains_exit("error: role 'rollout-0' died during rollout: ...")  # no way on
    assert not explains_exit("continue from the newest checkpoint (step_000001): python trainer.py --resume R")


def test_points_follow_the_plan() -> None:
    plain = available_points({"rollout", "reward", "learner"}, validation=False)
    assert "actor_ref.compute_log_probs" not in plain and "tools.call" not in plain
    assert "rollout.evaluate" not in plain and "driver.between_steps" in plain
    assert "tools.call" in available_points({"rollout", "reward", "learner", "tools"}, validation=False)
    # an opt-in point only where named, so the default campaigns draw what they drew before it existed
    assert "learner.publish" not in plain
    named = available_points({"rollout", "reward", "learner"}, False, ("learner.publish", "tools.call"))
    assert named == ["learner.publish"]


def _outcome(exits: list[int], fired: bool = True, equal: bool = True, **kw) -> Outcome:
    fault = Fault("reward.score", 1, "kill", "/m")
    flags = dict(digest_equal=equal, weights_equal=equal, optimizer_steps_equal=equal, cursor_equal=equal)
    return Outcome(Injection(0, fault), exits, fired, **flags, **kw)


def test_the_verdict_names_who_recovered() -> None:
    assert _outcome([0], restarts=1.0).recovered_by == "relay"
    assert _outcome([0]).recovered_by == "no effect"
    assert _outcome([0], nodes_lost=1).recovered_by == "relay"  # Ray moved its actors; no call failed
    assert _outcome([1, 0]).recovered_by == "resume"
    assert _outcome([1, 0], equal=False).recovered_by == "failed"
    assert _outcome([0], restarts=1.0, hung=True).recovered_by == "failed"
    assert _outcome([1, 0], traceback_tail=True).recovered_by == "failed"
    assert _outcome([0], fired=False).recovered_by == "not reached"
    assert _outcome([1, 0], from_scratch=True).recovered_by == "from scratch"  # exit 2 or no checkpoint: anew
    table = report([_outcome([0], restarts=1.0), _outcome([1, 0]), _outcome([0]), _outcome([0], fired=False)])
    assert table[-1] == "| reward.score | kill | 4 | 1 | 1 | 0 | 1 | 0 | 1 |"


def test_no_effect_must_say_why_or_it_fails() -> None:
    assert _outcome([0], unexplained_no_effect=True).recovered_by == "failed"
    assert _outcome([0], unexplained_no_effect=True).caught_by == ["no effect, unexplained"]
    assert no_effect_reason(Fault("driver.between_steps", 2, "term", "/m"), steps=3).endswith("left to stop or resume")
    assert no_effect_reason(Fault("rollout.evaluate", 2, "kill", "/m"), steps=3) is None  # a validation after it


def test_a_run_that_never_fired_still_fails_when_it_differs_hangs_or_dies() -> None:
    assert _outcome([0], fired=False, equal=False).recovered_by == "failed"
    assert _outcome([0], fired=False, hung=True).recovered_by == "failed"
    assert _outcome([1], fired=False).caught_by == ["exit 1"]
    assert _outcome([0], fired=False, differs=["optimizer (step_000003 learner/optimizer.safetensors)"]).caught_by == [
        "optimizer (step_000003 learner/optimizer.safetensors)"
    ]


def test_a_campaigns_record_reads_back_into_its_table(tmp_path) -> None:
    """What run_campaign appends to chaos.jsonl is what ``python -m benchmarks.faults.report`` reads back."""
    from dataclasses import asdict

    outcomes = [_outcome([0], restarts=1.0), _outcome([1, 0], unexplained_exit=True)]
    record = tmp_path / "chaos.jsonl"
    lines = [json.dumps({"seed": 1, "reference": {}})]
    lines += [json.dumps({**asdict(o), "recovered_by": o.recovered_by, "ok": o.ok}) for o in outcomes]
    record.write_text("\n".join(lines) + "\n")
    read = read_outcomes(record)
    assert read == outcomes and [o.recovered_by for o in read] == ["relay", "failed"]
    assert report(read)[-1] == "| reward.score | kill | 2 | 1 | 0 | 0 | 0 | 1 | 0 |"


def test_a_traceback_at_the_end_is_caught(tmp_path) -> None:
    log = tmp_path / "a.log"
    log.write_text("step 1\nTraceback (most recent call last):\n  File x\nOSError: [Errno 28]\n")
    assert chaos_verdict.ends_in_traceback(log)
    log.write_text("error: checkpoint step_000002 could not be written\ncontinue from ...\n")
    assert not chaos_verdict.ends_in_traceback(log)


def _tiny_job(tiny_model_dir: Path, head) -> chaos.Job:
    # 60 s per call: beside another heavy test module on 2 cores the rollout's start-up alone took over 30 s, and a
    # start-up timeout before the fault fires leaves its injection (a damaged checkpoint) with nothing to act on.
    overrides = (
        *chaos.job_overrides(tiny_model_dir, steps=3, call_timeout_s=60.0, restart_timeout_s=120.0, save_freq=1),
        "rollout.engine=hf",
        "data.max_response_length=16",
        "rollout.n=2",
        *TOY_REWARD_OVERRIDES,  # a reward the tiny model earns: every step's update moves its weights
    )
    return chaos.Job(chaos.REPO_ROOT / "configs" / "tiny.yaml", overrides, head.driver_env, bound_s=420.0)


def test_a_seeded_campaign_on_a_learning_run_passes_and_two_known_bad_recoveries_fail(tiny_model_dir, tmp_path) -> None:
    """Seed 26's first two faults on the tiny job, whose undisturbed run learns at every step (the campaign refuses
    one that does not): the reward actor killed in or just after step 1's grading, then the driver killed between
    steps 2 and 3 and its newest checkpoint damaged (a truncated file: ``--resume`` sets it aside and goes back to the
    one before). A kill that lands inside the work fails its call and Relay restarts the actor
    (``recovery/restarts``); one that lands after it leaves a dead actor that Ray restarts before the next call, and
    Relay reads that restart from the actor's own report (``recovery/ray_restarts``): "recovered by Relay" either
    way, whatever the timing. Every completed run equals the undisturbed one: digest, weights, optimizer steps, data
    cursor, every kept checkpoint and the HF export. (A rollout killed in validation is a slow test:
    :func:`test_a_restart_inside_validation_counts_in_its_steps_row`.)

    Then the same verdict on two known-bad recoveries: a learner that applies its first update twice after the
    resume a learner kill forces, and a rollout restarted with another sampling stream; each must end "failed"
    (the campaign's whole path: reference, injections, resume, mutations, verdict; six trainer runs). Last, a
    SIGTERM at the user's checkpoint cadence, against the same undisturbed run
    (:func:`_sigterm_at_the_users_cadence`)."""
    from benchmarks.faults.run_dir import run_summary
    from benchmarks.harness.ray_head import isolated_head

    with isolated_head(env={"PYTHONPATH": pythonpath({})}, dashboard=False) as head:
        job = _tiny_job(tiny_model_dir, head)
        outcomes = chaos.run_campaign(job, chaos.Draw(seed=26, faults=2, steps=3), tmp_path)
        reference = run_summary(tmp_path / "reference")
        mutants = chaos.run_mutations(job, ["update_twice", "sampling_rng"], tmp_path, reference, start=2)
        stopped = _sigterm_at_the_users_cadence(job, tmp_path, reference)
    drawn = [(o.injection.fault.point, o.injection.fault.action, o.injection.corruption) for o in outcomes]
    assert drawn == [("reward.score", "kill", None), ("driver.between_steps", "kill", "truncate")]
    verdicts = [(o.exits, o.caught_by, o.note) for o in outcomes]
    assert [o.recovered_by for o in outcomes] == ["relay", "resume"], verdicts
    refused = Path(tmp_path / "run-001" / "checkpoints")
    assert any(p.name.startswith("refused-") for p in refused.iterdir())  # the damaged checkpoint, set aside
    record = [json.loads(ln) for ln in (tmp_path / "chaos.jsonl").read_text().splitlines()]
    assert record[0]["seed"] == 26 and record[0]["spans"]["reward.score"]  # the delays' measured work
    assert [o.recovered_by for o in mutants] == ["failed", "failed"], mutation_report(mutants)
    twice, rng = (set(c.split(" ")[0] for c in o.caught_by) for o in mutants)
    assert {"policy", "optimizer_steps", "optimizer", "export"} <= twice  # an extra update, wherever it is looked
    assert {"metrics", "policy"} <= rng  # other samples, another update
    _check_sigterm_outcome(stopped, tmp_path)


def _sigterm_at_the_users_cadence(job: chaos.Job, out: Path, reference: dict) -> Outcome:
    """SIGTERM to the driver right after step 0 (as a preempted VM or ``ray job stop`` sends it) in a run with the
    user's default cadence (no checkpoint between the first step and the last), judged against the campaign's
    undisturbed run (a checkpoint every step: the two share step 1's, which the stop forces, and the final one)."""
    at_the_end_only = chaos.Job(job.preset, (*job.overrides, "trainer.save_freq=-1"), job.env, job.bound_s)
    fault = Fault("driver.between_steps", 0, "term", str(out / "term.fired"))
    return chaos.run_injection(at_the_end_only, Injection(SIGTERM_RUN, fault), out, reference)


SIGTERM_RUN = 4  # after the campaign's two faults and the two known-bad recoveries


def _check_sigterm_outcome(outcome: Outcome, out: Path) -> None:
    """The run stops before step 1, writes ``step_000001`` anyway, exits 143 with the resume command, and
    ``--resume`` ends equal to the undisturbed run."""
    assert outcome.exits == [143, 0] and outcome.recovered_by == "resume", (outcome.exits, outcome.caught_by)
    log = (out / f"run-{SIGTERM_RUN:03d}.log").read_text()
    assert "stopping before step 1: SIGTERM received" in log
    assert "continue from the newest checkpoint (step_000001)" in log
    rows = [json.loads(ln) for ln in (out / f"run-{SIGTERM_RUN:03d}" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]


def _run_dir(tmp_path: Path, model_dir: Path, rows: list[dict], moved: bool) -> Path:
    """A run directory as the trainer leaves it: its config, its metrics and a final checkpoint whose policy is the
    model's weights (``moved``: one tensor nudged)."""
    from safetensors.torch import load_file

    from relay.checkpoint.tree_io import save_tree

    run = tmp_path / "reference"
    learner = run / "checkpoints" / "step_000001" / "learner"
    learner.mkdir(parents=True)
    (run / "config.yaml").write_text(f"model:\n  path: {model_dir}\n")
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    weights = {k: v.float().numpy() for k, v in load_file(str(model_dir / "model.safetensors")).items()}
    if moved:
        name = sorted(weights)[0]
        weights[name] = weights[name] + 1e-3
    save_tree(learner, "policy", weights)
    return run


def test_a_run_without_learning_signal_is_refused_with_exit_2(tiny_model_dir, tmp_path, capsys) -> None:
    """The tiny model under GSM8K's rule reward earns 0: no group has a reward spread, no gradient, no weight moves,
    so a lost or doubled update would compare equal. The campaign refuses such an undisturbed run, saying why."""
    from benchmarks.faults.run_dir import signal_problems

    flat = [{"step": 0, "advantage/zero_groups_frac": 1.0, "actor/grad_norm": 0.0}]
    run = _run_dir(tmp_path, tiny_model_dir, flat, moved=False)
    problems = signal_problems(run)
    assert problems == [
        "step 0: every group's rewards are equal (advantage/zero_groups_frac=1.0)",
        "step 0: actor/grad_norm=0.0",
        "the final policy equals the initial weights",
    ]
    with pytest.raises(SystemExit) as refused:
        raise chaos.NoSignalError(problems, run)
    assert refused.value.code == 2 and "has no learning signal" in capsys.readouterr().err
    learning = [{"step": 0, "advantage/zero_groups_frac": 0.5, "actor/grad_norm": 0.3}]
    assert signal_problems(_run_dir(tmp_path / "b", tiny_model_dir, learning, moved=True)) == []


def test_the_signal_check_reads_a_prepared_model_by_its_name(tiny_model_dir, tmp_path, monkeypatch) -> None:
    """``model.path: smollm2-135m`` (the presets') names the model Relay prepared under ``RELAY_HOME``: the initial
    weights are read there, as the trainer resolves it."""
    from benchmarks.faults.run_dir import weights_moved
    from relay.models.prepare_smollm2 import MODEL_NAME

    monkeypatch.setenv("RELAY_HOME", str(tmp_path / "home"))
    (tmp_path / "home" / "models").mkdir(parents=True)
    (tmp_path / "home" / "models" / MODEL_NAME).symlink_to(tiny_model_dir)
    run = _run_dir(tmp_path, tiny_model_dir, [], moved=True)
    (run / "config.yaml").write_text("model:\n  path: smollm2-135m\n")
    assert weights_moved(run)


@pytest.mark.slow  # ~4 min on 2 busy cores: six trainer runs and a 30 s hang bound
def test_a_seeded_campaign_ends_every_run_equal_to_the_undisturbed_one(tiny_model_dir, tmp_path) -> None:
    from benchmarks.harness.ray_head import isolated_head

    with isolated_head(dashboard=False) as head:
        outcomes = chaos.run_campaign(_tiny_job(tiny_model_dir, head), chaos.Draw(seed=2, faults=3, steps=3), tmp_path)
    assert [o.recovered_by for o in outcomes] == ["relay", "resume", "resume"], [(o.exits, o.note) for o in outcomes]
    assert outcomes[0].restarts >= 1
    rows = [json.loads(ln) for ln in (tmp_path / "chaos.jsonl").read_text().splitlines()]
    assert rows[0]["seed"] == 2 and [r["ok"] for r in rows[1:]] == [True, True, True]
    armed = [json.loads(ln) for ln in (tmp_path / "run-001" / "events.jsonl").read_text().splitlines()]
    assert any(e["event"] == "fault_armed" and e["campaign"] == "seed 2, fault 2 of 3" for e in armed)
    refused = Path(tmp_path / "run-002" / "checkpoints")
    assert any(p.name.startswith("refused-") for p in refused.iterdir())  # the damaged checkpoint, set aside


def _one_fault_run(
    tiny_model_dir: Path, tmp_path: Path, fault: Fault, *overrides: str, follow_up: Fault | None = None
) -> tuple[Outcome, list]:
    """The tiny job (with ``overrides``) run undisturbed, then once with ``fault`` (and ``follow_up`` inside its
    recovery), resumed as a campaign does: the outcome and the faulted run's metrics rows."""
    from benchmarks.faults.run_dir import run_summary
    from benchmarks.harness.ray_head import isolated_head

    with isolated_head(dashboard=False) as head:
        job = _tiny_job(tiny_model_dir, head)
        job = chaos.Job(job.preset, (*job.overrides, *overrides), job.env, job.bound_s)
        reference_dir = tmp_path / "reference"
        assert chaos.run_attempt(job.command(reference_dir, False), job.env, job.bound_s, tmp_path / "ref.log")[0] == 0
        injection = Injection(0, fault, follow_up=follow_up)
        outcome = chaos.run_injection(job, injection, tmp_path, run_summary(reference_dir))
    rows = [json.loads(ln) for ln in (tmp_path / "run-000" / "metrics.jsonl").read_text().splitlines()]
    return outcome, rows


@pytest.mark.slow  # ~1 min on 2 cores: the undisturbed run and the run whose rollout is killed twice
def test_a_kill_inside_a_restarts_resync_is_recovered_inside_the_run(tiny_model_dir, tmp_path) -> None:
    """A fault inside a recovery: the rollout killed as step 1's generation starts, and killed again while Relay
    gives its restarted process the synced weights; Relay restarts it a second time (``trainer.role_restarts`` is 2)
    and the run completes in one attempt, equal to the undisturbed one."""
    first = Fault("rollout.generate", 1, "kill", str(tmp_path / "pair.fired"))
    second = Fault("rollout.load_weights", 0, "kill", str(tmp_path / "pair.second.fired"), after=first.marker)
    outcome, _ = _one_fault_run(tiny_model_dir, tmp_path, first, follow_up=second)
    assert (outcome.exits, outcome.recovered_by, outcome.restarts) == ([0], "relay", 2.0), outcome


@pytest.mark.slow  # ~1 min on 2 cores: the undisturbed run and the run whose validation loses its rollout
def test_a_restart_inside_validation_counts_in_its_steps_row(tiny_model_dir, tmp_path) -> None:
    """The rollout killed at the start of the validation after step 1 (no delay: inside its call for certain): the
    call fails, Relay restarts the rollout and asks again, and step 1's row counts the restart. Found by a seeded
    campaign on the default preset, whose verdict read "no effect" while the row counted only the step's own
    restarts; the completed run equals the undisturbed one."""
    fault = Fault("rollout.evaluate", 2, "kill", str(tmp_path / "fired"))  # version 2: after step 1
    outcome, rows = _one_fault_run(tiny_model_dir, tmp_path, fault)
    assert outcome.recovered_by == "relay" and outcome.exits == [0], outcome
    assert [r["recovery/restarts"] for r in rows] == [0.0, 1.0, 0.0]


@pytest.mark.slow  # ~1 min on 2 cores: the undisturbed pipelined run and the run whose rollout dies loading
def test_a_restart_inside_a_pipelined_load_counts_in_the_row_collected_after_it(tiny_model_dir, tmp_path) -> None:
    """One step off policy, the rollout killed as it loads step 0's weights in the collect thread: the load fails,
    Relay restarts the rollout and loads again, and the row of the step whose collect comes after that load in the
    collect thread's queue (step 2: step 1's collect was queued before it) counts the restart.
    Found by the seeded campaign on the one-step-off-policy preset, whose verdict read "no effect": no row counted
    a restart made during a pipelined load."""
    fault = Fault("rollout.load_weights", 0, "kill", str(tmp_path / "fired"))
    outcome, rows = _one_fault_run(tiny_model_dir, tmp_path, fault, "trainer.max_staleness=1")
    assert outcome.recovered_by == "relay" and outcome.exits == [0], outcome
    assert [r["recovery/restarts"] for r in rows] == [0.0, 0.0, 1.0]


@pytest.mark.slow  # ~2 min on 2 cores: the undisturbed run, the run whose sync fails for good, its resume
def test_a_sync_failing_for_good_after_the_update_loses_no_step(tiny_model_dir, tmp_path) -> None:
    """No restarts allowed, and the rollout killed as it loads step 1's weights: the sync after step 1's update fails
    for good, so the run ends with an emergency checkpoint after step 1 that keeps the step's row (the record would
    otherwise skip step 1) and the validation due after it; the resumed run records both and ends equal to the
    undisturbed run in digest, weights, optimizer steps and data cursor."""
    fault = Fault("rollout.load_weights", 1, "kill", str(tmp_path / "fired"))
    outcome, rows = _one_fault_run(tiny_model_dir, tmp_path, fault, "trainer.role_restarts=0")
    assert outcome.exits == [1, 0] and outcome.fired and outcome.ok, outcome
    assert [r["step"] for r in rows] == [0, 1, 2] and "val/accuracy_greedy" in rows[1]
    events = [json.loads(ln) for ln in (tmp_path / "run-000" / "events.jsonl").read_text().splitlines()]
    assert any(e["event"] == "checkpoint" and e.get("reason") == "emergency" and e["step"] == 2 for e in events)


@pytest.mark.slow  # ~2 min: four raylets, the undisturbed run, the run that loses its learner's node, its resume
def test_a_lost_learner_node_leaves_the_run_equal_to_the_undisturbed_one(tiny_model_dir, tmp_path) -> None:
    """Seed 5's first node loss: the learner's raylet killed 0.36 s after step 2's update began. The node is lost
    (the campaign finds its raylet dead and replaces it) and the run completes equal to the undisturbed one: when
    the kill lands before the learner's last call, the run ends naming the node and ``--resume`` on the two raylets
    left completes it; when the tiny run has finished with the learner by then, it completes in one attempt."""
    from benchmarks.faults.cluster import NODE_LAYOUT, node_cluster

    with node_cluster(3) as cluster:
        job = _tiny_job(tiny_model_dir, cluster.head)
        job = chaos.Job(job.preset, (*job.overrides, *NODE_LAYOUT), job.env, job.bound_s)
        draw = chaos.Draw(seed=5, faults=1, steps=3, node_loss=True, actions=("kill_node",))
        (outcome,) = chaos.run_campaign(job, draw, tmp_path, cluster.restore)
        assert cluster.lost() == []
    assert (outcome.injection.fault.point, outcome.injection.fault.action) == ("learner.update", "kill_node")
    assert outcome.ok and outcome.nodes_lost == 1, outcome
    if outcome.recovered_by == "resume":
        assert "was lost; it held learner-0" in (tmp_path / "run-000.log").read_text()


@pytest.mark.slow  # ~4 min: the undisturbed run, the run whose head is lost (15 s bound), the head again, its resume
def test_a_lost_head_ends_the_run_explained_and_resume_on_a_new_head_completes_it(tiny_model_dir, tmp_path) -> None:
    """The Ray head's GCS killed between steps (``kill_gcs``): the run exits 1 with the head watch's error line and
    the checkpoint to go on from; the campaign starts the head again on the same address, and ``--resume`` completes
    the run equal to the undisturbed one. Seed 1 draws the kill inside step 2's checkpoint (``driver.checkpoint``),
    after step 1's was saved."""
    from benchmarks.harness.ray_head import isolated_head

    with isolated_head(dashboard=False) as head:
        job = _tiny_job(tiny_model_dir, head)
        job = chaos.Job(job.preset, job.overrides, job.env, job.bound_s, head)
        draw = chaos.Draw(seed=1, faults=1, steps=3, actions=("kill_gcs",), head_loss=True)
        (outcome,) = chaos.run_campaign(job, draw, tmp_path)
    assert outcome.injection.fault.action == "kill_gcs" and outcome.heads_restarted == 1
    assert outcome.exits == [1, 0] and outcome.recovered_by == "resume", outcome
    assert "error: the Ray head's GCS at" in (tmp_path / "run-000.log").read_text()


def test_a_delivered_fault_says_when_and_by_whom(tmp_path) -> None:
    fault = Fault("reward.score", 1, "kill", str(tmp_path / "fired"), delay_s=0.25)
    (tmp_path / "fired").write_text(json.dumps({"pid": 41, "time": 100.0}))
    (tmp_path / "fired.sent").write_text(json.dumps({"pid": 41, "time": 100.3}))
    assert delivery_note(fault) == "kill sent by pid 41 0.300 s after reward.score at step 1 (drawn delay 0.25 s)"


def test_the_report_refuses_a_missing_record_and_helps(tmp_path, capsys) -> None:
    """``--help`` is help, and a path with no record behind it is named, with the fix, instead of a traceback."""
    with pytest.raises(SystemExit) as helped:
        main(["--help"])
    assert helped.value.code == 0 and "chaos.jsonl" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        main([str(tmp_path / "nope.jsonl")])
    assert refused.value.code == 2 and "no campaign record at" in capsys.readouterr().err
