"""How a fault-injection campaign (:mod:`benchmarks.faults.chaos`) reads what an attempt left: whether its faults
reached the processes they were drawn for, whether it ended in a traceback, whether an exit said why and how to go on,
and why a delivered fault may have left nothing to recover."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.faults.draw import CHECKPOINT_POINTS
from benchmarks.faults.report import Injection
from benchmarks.faults.run_dir import delivery_problem
from relay.faults import Fault, sent_marker


def check_deliveries(injection: Injection, run_dir: Path, delivered: dict[str, str | None]) -> None:
    """Each fault of ``injection`` delivered by the attempt that just ended, checked against the run's record
    (:func:`benchmarks.faults.run_dir.delivery_problem`): ``delivered[marker]`` is None when it hit a process of the
    point's role, else why not. A fault counts as fired only when it was delivered and so checked."""
    for fault in injection.faults:
        if fault.marker not in delivered and Path(sent_marker(fault.marker)).exists():
            delivered[fault.marker] = delivery_problem(fault, run_dir)


def delivery_note(fault: Fault) -> str:
    """When ``fault`` was delivered after its point was reached, and by which process: what a "no effect" verdict
    reports (the fault landed after the work it aimed at, and no call failed or restart followed)."""
    reached = json.loads(Path(fault.marker).read_text())
    sent = json.loads(Path(sent_marker(fault.marker)).read_text())
    return (
        f"{fault.action} sent by pid {sent['pid']} {sent['time'] - reached['time']:.3f} s after "
        f"{fault.point} at step {fault.step} (drawn delay {fault.delay_s:g} s)"
    )


def ends_in_traceback(log: Path) -> bool:
    """Whether the attempt's last terminal lines are a Python traceback rather than Relay's message."""
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return any(ln.startswith("Traceback (most recent call last)") for ln in lines[-25:])


def explains_exit(text: str) -> bool:
    r"""Whether an attempt that exited 1 said why and how to go on, as ``driver/run_record.py`` words it: an
    ``error:`` line (the role and the phase, or the checkpoint that failed) and the resume command or that there is
    no checkpoint yet.

    >>> explains_exit("error: role 'learner-0' died during update: ...\ncontinue from the newest checkpoint "
    ...               "(step_000002): python trainer.py --resume out/run")
    True
    >>> explains_exit("step 1 ...\nKilled")
    False
    """
    lines = text.splitlines()
    said_why = any(ln.startswith(("error: ", "stopping before step ")) for ln in lines)  # a failure, or a SIGTERM
    return said_why and any("trainer.py --resume" in ln or "no checkpoint to resume from" in ln for ln in lines)


def explains_refusal(text: str) -> bool:
    """Whether an attempt that exited 2 (refused before any actor started) said what it refused and why: Relay's
    ``config error:``, ``data error:`` or ``placement error:`` line, whose text names the key or file and the fix.

    >>> explains_refusal("config error: --resume out/run: no usable checkpoint, ...; start it anew from its config")
    True
    >>> explains_refusal("Traceback (most recent call last):")
    False
    """
    return any(ln.startswith(("config error: ", "data error: ", "placement error: ")) for ln in text.splitlines())


def no_effect_reason(fault: Fault, steps: int) -> str | None:
    """Why a delivered ``fault`` may leave nothing to recover: it landed in the run's last work of its kind, after
    which no call reached the process (or no step was left to stop). None when it did not: a fault before the last
    step that nothing recovered from is a restart the record hides, and fails the verdict.

    >>> no_effect_reason(Fault("reward.score", 2, "kill", "/m"), steps=3)
    'in step 2, the last: no later call reached the reward role to find its process gone'
    >>> no_effect_reason(Fault("reward.score", 1, "kill", "/m"), steps=3) is None
    True
    """
    last = steps if fault.point in CHECKPOINT_POINTS or fault.point == "rollout.evaluate" else steps - 1
    if fault.step < last:
        return None
    role = fault.point.split(".")[0]
    if role == "driver":
        return f"at step {fault.step}, the last: no step was left to stop or resume"
    return f"in step {fault.step}, the last: no later call reached the {role} role to find its process gone"
