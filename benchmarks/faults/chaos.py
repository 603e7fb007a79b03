"""Fault injection: a preset's tiny job, one fault at a time at points drawn from a seed, resumed the way a user
would until it completes; every completed run must equal the same job run without faults.

    python -m benchmarks.faults.chaos --faults 50 --seed 1 [--preset configs/default.yaml] [--steps 4] [--out DIR]
    python -m benchmarks.faults.chaos --faults 6 --seed 1 --nodes 3 --actions kill_node   # lost raylets
    python -m benchmarks.faults.chaos --faults 4 --points actor_ref.compute_log_probs \
        --set algorithm.ref_log_prob_source=actor_ref                          # one role's point only
    python -m benchmarks.faults.chaos --faults 5 --head-loss --actions kill_gcs      # the Ray head's GCS killed
    python -m benchmarks.faults.chaos --faults 8 --in-recovery --save-freq 1         # a second kill inside the recovery
    python -m benchmarks.faults.chaos --faults 3 --points learner.publish            # no memory for the new weights

Each fault is a :class:`relay.faults.Fault` (a point in the product's code, a step, kill / stop / enospc, and a
delay: a drawn fraction of the seconds the undisturbed run spent on the work after that point at that step,
:func:`benchmarks.faults.run_dir.work_spans`, so that the fault lands inside that work; none where nothing times it) or
a damaged checkpoint (the driver killed between steps, then a file of the newest checkpoint truncated or flipped
before ``--resume``). The run is started with the fault in
``RELAY_FAULT``. With ``--nodes N`` the runs join a cluster of ``N`` raylets (:mod:`benchmarks.faults.cluster`) and a
role's point may also draw ``kill_node`` or ``stop_node``: its node's raylet SIGKILLed or SIGSTOPped, the node
restored after the fault. When a run
ends with exit 1 (or is killed) it is resumed with ``--resume`` on its run directory, as a user would, at most
:data:`MAX_ATTEMPTS` times. Every attempt runs under a wall-clock bound
(``trainer.role_call_timeout_s`` + ``trainer.role_restart_timeout_s`` + the start-up's): past it, a hang.

The verdict of each fault is computed: the completed run's metrics digest (:mod:`relay.run.digest`, recoveries
and times left out) and final policy weights equal the undisturbed run's bit for bit (``trainer.deterministic``,
CPU), its last step's ``actor/optimizer_steps`` equals the reference's (none applied twice or skipped), its final
data cursor equals the reference's, no attempt ended in a traceback, and every exit 1 said why and how to resume.
The seed, each fault and each attempt's exit go to ``DIR/chaos.jsonl``; the same seed draws the same points, steps,
actions and delay fractions (a delay's seconds follow the undisturbed run's timing on the machine). A fault's exact
form is its line in ``chaos.jsonl`` and its run's ``fault_armed`` event: ``RELAY_FAULT='<that JSON>' python
trainer.py ...`` replays it alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.faults.cluster import NODE_LAYOUT, node_cluster
from benchmarks.faults.draw import Draw, available_points, draw_campaign, draw_in_recovery
from benchmarks.faults.mutations import MUTATIONS, arm, pythonpath
from benchmarks.faults.report import Injection, Outcome, mutation_report, report
from benchmarks.faults.run_dir import (
    corrupt_newest,
    differences,
    run_summary,
    signal_problems,
    work_spans,
)
from benchmarks.faults.verdict import (
    check_deliveries,
    delivery_note,
    ends_in_traceback,
    explains_exit,
    explains_refusal,
    no_effect_reason,
)
from benchmarks.harness.ray_head import Head, gcs_answers, isolated_head
from driver.stop_signal import EXIT_STOPPED
from relay.checkpoint import list_checkpoints
from relay.faults import FAULT_ENV, Fault, faults_to_env
from relay.repo import REPO_ROOT

MAX_ATTEMPTS = 4


def run_attempt(cmd: list[str], env: dict[str, str], bound_s: float, log: Path) -> tuple[int, bool]:
    """Run one trainer attempt (its own process group) with output to ``log``; ``(exit code, hung)``: past
    ``bound_s`` the group is killed and the attempt counts as a hang. The output comes through a pipe, as a terminal
    or ``ray job logs`` would take it, so a fault that limits the trainer's own file writes (``short_write``) does
    not also silence what it says."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=REPO_ROOT, start_new_session=True
        )
        copier = threading.Thread(target=_copy, args=(proc.stdout, out), daemon=True)
        copier.start()
        try:
            code, hung = proc.wait(timeout=bound_s), False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            code, hung = proc.wait(), True
        copier.join(timeout=30)  # the pipe closes when the last process holding it exits
        return code, hung


def _copy(source: Any, out: Any) -> None:
    for chunk in iter(lambda: source.read1(65536), b""):
        out.write(chunk)
        out.flush()


@dataclass(frozen=True)
class Job:
    """The job every injection runs: the trainer command's settings and each attempt's wall-clock bound."""

    preset: Path
    overrides: tuple[str, ...]
    env: dict[str, str]
    bound_s: float
    head: Head | None = None  # started again before an attempt when a fault took its GCS down (kill_gcs)

    def command(self, run_dir: Path, resume: bool) -> list[str]:
        if resume:
            return [sys.executable, "trainer.py", "--resume", str(run_dir)]
        name = [f"trainer.output_dir={run_dir.parent}", f"trainer.run_name={run_dir.name}"]
        sets = [arg for override in (*self.overrides, *name) for arg in ("--set", override)]
        return [sys.executable, "trainer.py", "--config", str(self.preset), *sets]


def job_overrides(
    model: Path | None,
    steps: int,
    call_timeout_s: float,
    restart_timeout_s: float = 300.0,
    save_freq: int | None = None,
) -> tuple[str, ...]:
    """The settings a campaign changes from the preset, each for a reason: deterministic (a bitwise comparison; a
    CPU run is repeatable without it, a GPU run is not), validation every 2 steps on 2 problems (its faults reached
    in a short run), no wall-clock budget (``trainer.time_budget_minutes``: a run's length must not depend on how
    fast the machine was, or a reference slowed by other work ends a step early and every faster run "differs"), a
    hang bound (it must cover the slowest call of a step once the reference run has filled the
    compilation cache; the default 3,600 s would hold a campaign for an hour per hang) and the restart bound (a vLLM
    rollout takes tens of seconds to start on a CPU). The checkpoint cadence, retention and the HF export stay the
    preset's, as a user runs them (the verdict compares every kept checkpoint and the export); ``save_freq`` sets
    the cadence where a campaign needs checkpoints between steps (the known-bad recoveries of ``--resume``)."""
    model_set = (f"model.path={model}",) if model is not None else ()
    cadence = (f"trainer.save_freq={save_freq}",) if save_freq is not None else ()
    return (
        *model_set,
        f"trainer.total_training_steps={steps}",
        "trainer.time_budget_minutes=null",
        "trainer.deterministic=true",
        *cadence,
        "trainer.test_freq=2",
        "trainer.val_samples=2",
        "trainer.val_k=0",
        f"trainer.role_call_timeout_s={call_timeout_s:g}",
        f"trainer.role_restart_timeout_s={restart_timeout_s:g}",
    )


def run_injection(job: Job, injection: Injection, out: Path, reference: dict) -> Outcome:
    """Start the run armed with the fault, resume it after each failed attempt (damaging the newest checkpoint first
    for a corruption), and compare the completed run with ``reference``."""
    run_dir = out / f"run-{injection.index:03d}"
    log = out / f"run-{injection.index:03d}.log"
    env = {**job.env, FAULT_ENV: faults_to_env(injection.faults)}
    if injection.mutation is not None:  # a known-bad recovery in the run's processes (benchmarks/faults/mutations.py)
        arm(injection.fault.marker, injection.mutation)
        env["PYTHONPATH"] = pythonpath(env)
    outcome = Outcome(injection)
    rng = random.Random(injection.index)
    code, delivered = 0, {}
    for attempt in range(MAX_ATTEMPTS):
        # Failed before its first checkpoint, or --resume found none usable (exit 2): a user starts it again.
        resume = attempt > 0 and code != 2 and bool(list_checkpoints(run_dir))
        if attempt > 0 and not resume:
            shutil.rmtree(run_dir, ignore_errors=True)
            outcome.from_scratch = True
        if attempt == 1 and resume and injection.corruption:
            corrupt_newest(run_dir, injection.corruption, rng)
        if job.head is not None and job.head.restart is not None and not gcs_answers(job.head):
            job.head.restart()  # the head a user starts again after losing it: same address
            outcome.heads_restarted += 1
        start = log.stat().st_size if log.exists() else 0
        code, hung = run_attempt(job.command(run_dir, resume), env, job.bound_s, log)
        check_deliveries(injection, run_dir, delivered)  # before a restart anew removes this attempt's record
        outcome.exits.append(code)
        outcome.hung |= hung
        if code != 0:
            outcome.traceback_tail |= ends_in_traceback(log)
        if code in (1, 2, EXIT_STOPPED):  # this attempt's part of the log must say why and how to go on
            with open(log, "rb") as f:
                f.seek(start)
                text = f.read().decode(errors="replace")
            outcome.unexplained_exit |= not (explains_refusal(text) if code == 2 else explains_exit(text))
        if code == 0 or hung:
            break
    outcome.fired = all(delivered.get(f.marker) is None and f.marker in delivered for f in injection.faults)
    notes = [delivered[f.marker] or delivery_note(f) for f in injection.faults if f.marker in delivered]
    notes += [  # reached, and the process gone before the signal was due (killed by something else, or ended)
        f"{f.point} reached at step {f.step}, its {f.action} never sent"
        for f in injection.faults
        if f.marker not in delivered and Path(f.marker).exists()
    ]
    outcome.note = "; ".join(notes)
    if outcome.exits[-1] == 0:
        summary = run_summary(run_dir)
        outcome.digest_equal = summary["digest"] == reference["digest"]
        outcome.weights_equal = summary["policy"] == reference["policy"]
        outcome.optimizer_steps_equal = summary["optimizer_steps"] == reference["optimizer_steps"]
        outcome.cursor_equal = summary["cursor"] == reference["cursor"]
        outcome.differs = differences(summary, reference)
        outcome.restarts = summary["restarts"]
    if outcome.fired and outcome.exits == [0] and not (outcome.restarts or outcome.nodes_lost):
        reasons = [no_effect_reason(f, len(reference["rows"])) for f in injection.faults]
        outcome.unexplained_no_effect = None in reasons
        outcome.note += "".join(f"; {r}" for r in reasons if r)
    return outcome


def plan_roles(preset: Path, overrides: tuple[str, ...]) -> tuple[set[str], bool]:
    """The roles the preset's plan starts, and whether it validates."""
    from placement.plan import build_plan
    from relay.config import load_config

    cfg = load_config(preset, list(overrides)).cfg
    return {slot.role for slot in build_plan(cfg).slots}, cfg.trainer.test_freq > 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faults", type=int, default=50, help="faults to inject, one run each")
    parser.add_argument("--seed", type=int, default=1, help="draws the faults: the same seed, the same faults")
    parser.add_argument("--preset", type=Path, default=REPO_ROOT / "configs" / "default.yaml")
    parser.add_argument("--model", type=Path, default=None, help="model.path (default: the preset's)")
    parser.add_argument("--steps", type=int, default=4, help="training steps of each run")
    parser.add_argument("--set", dest="extra", action="append", default=[], help="more config overrides")
    parser.add_argument("--call-timeout", type=float, default=120.0, help="trainer.role_call_timeout_s of the runs")
    parser.add_argument("--restart-timeout", type=float, default=300.0, help="trainer.role_restart_timeout_s")
    parser.add_argument(
        "--save-freq",
        type=int,
        default=None,
        help="trainer.save_freq of the runs (default: the preset's; the known-bad recoveries: 1, so that a resume "
        "has a checkpoint between steps to start from)",
    )
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "outputs" / "chaos")
    parser.add_argument("--nodes", type=int, default=0, help="raylets to run on (kill_node faults); 0: one head")
    parser.add_argument("--actions", default=None, help="only these actions, comma-separated (e.g. kill_node)")
    parser.add_argument("--points", default=None, help="only these points, comma-separated (e.g. tools.call)")
    parser.add_argument(
        "--head-loss",
        action="store_true",
        help="the driver's points may also draw kill_gcs: the Ray head's GCS killed, the head started again on the "
        "same address before the resume",
    )
    parser.add_argument(
        "--in-recovery",
        action="store_true",
        help="each drawn kill followed by a second inside its recovery: the call sent again, a restarted rollout's "
        "resync, --resume's checkpoint load (use with --save-freq 1, so that a resume has a checkpoint to load)",
    )
    parser.add_argument(
        "--mutations",
        default=None,
        help="instead of drawn faults, run these known-bad recoveries (comma-separated, or 'all'; "
        "benchmarks/faults/mutations.py): the verdict must fail each",
    )
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    layout = NODE_LAYOUT if args.nodes else ()
    save_freq = 1 if args.mutations and args.save_freq is None else args.save_freq
    timeouts = (args.call_timeout, args.restart_timeout)
    overrides = (*job_overrides(args.model, args.steps, *timeouts, save_freq), *layout, *args.extra)
    bound = args.call_timeout + args.restart_timeout + 900  # a hang, a restart, the start-up and the steps
    actions = tuple(args.actions.split(",")) if args.actions else None
    points = tuple(args.points.split(",")) if args.points else None
    draw = Draw(args.seed, args.faults, args.steps, args.nodes > 0, actions, points, args.in_recovery, args.head_loss)
    if args.mutations:
        names = list(MUTATIONS) if args.mutations == "all" else args.mutations.split(",")
        unknown = [n for n in names if n not in MUTATIONS]
        if unknown:
            parser.error(f"--mutations {','.join(unknown)}: unknown; known: {', '.join(MUTATIONS)}")
        with isolated_head(env={"PYTHONPATH": pythonpath(dict(os.environ))}) as head:
            job = Job(args.preset.resolve(), overrides, head.driver_env, bound)
            outcomes = run_mutations(job, names, out)
        print("\n".join(mutation_report(outcomes)))
        missed = [o.injection.mutation for o in outcomes if o.recovered_by != "failed"]
        print(f"{len(outcomes)} known-bad recoveries, {len(missed)} passed the verdict {missed or ''}", file=sys.stderr)
        return 1 if missed else 0
    with contextlib.ExitStack() as stack:
        if args.nodes:
            cluster = stack.enter_context(node_cluster(args.nodes))
            head, after_each = cluster.head, cluster.restore
        else:
            head, after_each = stack.enter_context(isolated_head()), None
        job = Job(args.preset.resolve(), overrides, head.driver_env, bound, head)
        outcomes = run_campaign(job, draw, out, after_each)
    for line in report(outcomes):
        print(line)
    failed = [o for o in outcomes if o.recovered_by == "failed"]
    print(f"{len(outcomes)} faults, {len(failed)} failed; details in {out / 'chaos.jsonl'}", file=sys.stderr)
    return 1 if failed else 0


class NoSignalError(SystemExit):
    """The undisturbed run did not learn: a campaign on it could not tell a lost or doubled update (exit 2)."""

    def __init__(self, problems: list[str], run_dir: Path) -> None:
        print(f"chaos: the undisturbed run {run_dir} has no learning signal, so a recovery that lost, doubled or "
              "reset an update would compare equal:", file=sys.stderr)  # fmt: skip
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        print("  use a reward the model earns (benchmarks/harness/toy_reward.py: TOY_REWARD_OVERRIDES for the tiny "
              "model)", file=sys.stderr)  # fmt: skip
        super().__init__(2)


def run_reference(job: Job, out: Path) -> Path:
    """The undisturbed run; refused (:class:`NoSignalError`) unless it learned at every step."""
    reference_dir = out / "reference"
    code, hung = run_attempt(job.command(reference_dir, resume=False), job.env, job.bound_s, out / "reference.log")
    if code != 0 or hung:
        raise SystemExit(f"the undisturbed run failed (exit {code}); see {out / 'reference.log'}")
    problems = signal_problems(reference_dir)
    if problems:
        raise NoSignalError(problems, reference_dir)
    return reference_dir


def run_mutations(
    job: Job, names: list[str], out: Path, reference: dict | None = None, start: int = 0
) -> list[Outcome]:
    """The undisturbed run (or the ``reference`` summary of one), then each known-bad recovery
    (:mod:`benchmarks.faults.mutations`) with the fault that leads into it, as injections ``start``, ``start + 1``, ...;
    every outcome is appended to ``out/chaos.jsonl``. The verdict must fail each one. The Ray head must run with
    :func:`benchmarks.faults.mutations.pythonpath` for the patches to reach the role actors."""
    reference = run_summary(run_reference(job, out)) if reference is None else reference
    record = out / "chaos.jsonl"
    with open(record, "a") as f:
        f.write(json.dumps({"mutations": names, "reference": reference, "started": time.time()}) + "\n")
    outcomes = []
    for index, name in enumerate(names, start):
        point, step, action = MUTATIONS[name].fault
        fault = Fault(point, step, action, str(out / f"fault-{index:03d}.fired"), 0.0, f"mutation {name}")
        outcome = run_injection(job, Injection(index, fault, mutation=name), out, reference)
        outcomes.append(outcome)
        with open(record, "a") as f:
            row = {**asdict(outcome), "recovered_by": outcome.recovered_by, "caught_by": outcome.caught_by}
            f.write(json.dumps(row, default=str) + "\n")
    return outcomes


def run_campaign(job: Job, draw: Draw, out: Path, after_each: Callable[[], list[str]] | None = None) -> list[Outcome]:
    """The reference run, then each drawn injection (``after_each`` after each: the lost nodes replaced, their
    addresses returned); every outcome is appended to ``out/chaos.jsonl``."""
    from tqdm import tqdm

    reference_dir = run_reference(job, out)
    reference, spans = run_summary(reference_dir), work_spans(reference_dir)
    roles, validation = plan_roles(job.preset, job.overrides)
    points = available_points(roles, validation, draw.points)
    if not points:
        raise SystemExit(f"--points {','.join(draw.points or ())}: none is a point of this run ({sorted(roles)})")
    if draw.in_recovery:
        injections = draw_in_recovery(draw.seed, draw.faults, draw.steps, points, out)
    else:
        node_loss, actions = draw.node_loss, draw.actions
        injections = draw_campaign(
            draw.seed, draw.faults, draw.steps, points, out, node_loss, actions, spans, draw.head_loss
        )
    record = out / "chaos.jsonl"
    with open(record, "a") as f:
        f.write(json.dumps({**asdict(draw), "reference": reference, "spans": spans, "started": time.time()}) + "\n")
    outcomes = []
    for injection in tqdm(injections, desc="faults", unit="fault", file=sys.stderr):
        outcome = run_injection(job, injection, out, reference)
        outcomes.append(outcome)
        if after_each is not None:
            outcome.nodes_lost = len(after_each())
        with open(record, "a") as f:
            row = {**asdict(outcome), "recovered_by": outcome.recovered_by, "ok": outcome.ok}
            row["caught_by"] = outcome.caught_by
            f.write(json.dumps(row, default=str) + "\n")
    return outcomes


if __name__ == "__main__":
    sys.exit(main())
