"""What a fault-injection campaign (:mod:`benchmarks.faults.chaos`) draws from a seed: the points of the run, the
actions each point draws, and the faults (a point, an action, a step, a delay; or a damaged checkpoint), the same list
for the same arguments."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from benchmarks.faults.report import Injection
from relay.faults import NODE_ACTIONS, Fault

# What a point needs in the run (a role of the plan; "validation": trainer.test_freq > 0), and the actions drawn.
MENU: dict[str, tuple[str, tuple[str, ...]]] = {
    "rollout.generate": ("rollout", ("kill", "stop")),
    "rollout.load_weights": ("rollout", ("kill", "stop")),
    "rollout.evaluate": ("validation", ("kill",)),
    "reward.score": ("reward", ("kill", "stop")),
    "actor_ref.compute_log_probs": ("actor_ref", ("kill", "stop")),
    "tools.call": ("tools", ("kill", "stop")),
    "learner.update": ("learner", ("kill", "stop")),
    "learner.save_checkpoint": ("learner", ("kill", "enospc", "short_write")),
    "driver.checkpoint": ("driver", ("kill", "enospc", "short_write")),
    "driver.between_steps": ("driver", ("kill", "term")),
    "learner.publish": ("learner", ("enospc",)),
    "reward_model.score": ("reward_model", ("kill", "stop")),  # a run with reward_model.enable only
}
# Points drawn only where a campaign names them (--points): the memory for the new weights running out between the
# optimizer step and the weight sync.
OPT_IN_POINTS = ("learner.publish",)
# Points whose actor may lose its node (``kill_node``) in a campaign on several raylets.
NODE_LOSS_POINTS = ("rollout.generate", "reward.score", "actor_ref.compute_log_probs", "tools.call", "learner.update")
# Points whose step is a checkpoint's next step (1..steps) rather than a training step (0..steps-1).
CHECKPOINT_POINTS = ("learner.save_checkpoint", "driver.checkpoint")
CORRUPTIONS = ("truncate", "flip")
# The span a delay is drawn from after a point whose work no metric times (a checkpoint's files, a tool call, the
# moment between steps): none, so the fault fires at the point itself, e.g. between a checkpoint's files.
UNTIMED_WORK_S = 0.0


def available_points(roles: set[str], validation: bool, named: tuple[str, ...] | None = None) -> list[str]:
    """The menu's points this run reaches (its plan's roles, the driver, validation when it runs): those ``named``,
    or without names every point but the :data:`OPT_IN_POINTS`."""
    have = roles | {"driver"} | ({"validation"} if validation else set())
    reached = [point for point, (needs, _) in MENU.items() if needs in have]
    return [p for p in reached if p in named] if named is not None else [p for p in reached if p not in OPT_IN_POINTS]


# Points where the Ray head's GCS may be killed (``kill_gcs``: the driver runs on the head's machine).
HEAD_LOSS_POINTS = ("driver.between_steps", "driver.checkpoint")


def point_actions(point: str, node_loss: bool = False, head_loss: bool = False) -> tuple[str, ...]:
    """The actions a point draws from (``kill_node`` and ``stop_node`` too for a role's point when the campaign runs
    on raylets it may lose; ``kill_gcs`` for a driver's point when it may lose the head)."""
    extra = NODE_ACTIONS if node_loss and point in NODE_LOSS_POINTS else ()
    extra += ("kill_gcs",) if head_loss and point in HEAD_LOSS_POINTS else ()
    return MENU[point][1] + extra


def draw_campaign(
    seed: int,
    faults: int,
    steps: int,
    points: list[str],
    out: Path,
    node_loss: bool = False,
    actions: tuple[str, ...] | None = None,
    spans: dict[str, dict[int, float]] | None = None,
    head_loss: bool = False,
) -> list[Injection]:
    """``faults`` injections drawn from ``seed``: a point, an action, a step and a delay for each; one in eight is a
    damaged checkpoint instead. The delay is a fraction (drawn from 0-1) of ``spans[point][step]``, the seconds of
    the work after the point (:func:`benchmarks.faults.run_dir.work_spans`; :data:`UNTIMED_WORK_S` where it has none),
    ``rollout.evaluate``'s step is one of the weights versions ``spans`` saw validated, and a checkpoint point's one of
    the steps its checkpoints were saved at (the preset's cadence). ``node_loss`` adds
    ``kill_node`` and ``stop_node`` to the roles' points, ``head_loss`` ``kill_gcs`` to the driver's; ``actions``
    keeps only those actions (and no damaged checkpoints, which ``points`` without ``driver.between_steps`` leaves
    out too). The same arguments always draw the same list.

    >>> points = ["reward.score", "driver.between_steps"]
    >>> drawn = draw_campaign(3, 2, 4, points, Path("/o"), spans={"reward.score": {3: 0.01}})
    >>> [(i.fault.point, i.fault.action, i.fault.step, i.fault.delay_s, i.corruption) for i in drawn]
    [('reward.score', 'stop', 3, 0.006, None), ('driver.between_steps', 'kill', 2, 0.0, 'flip')]
    """
    spans = spans or {}
    rng = random.Random(seed)
    menu = {p: [a for a in point_actions(p, node_loss, head_loss) if actions is None or a in actions] for p in points}
    points = [p for p in points if menu[p]]
    # a damaged checkpoint needs one saved between steps to damage (not known without spans: assumed)
    resumable = "driver.checkpoint" not in spans or any(k < steps for k in spans["driver.checkpoint"])
    drawn = []
    for index in range(faults):
        marker = str(out / f"fault-{index:03d}.fired")
        campaign = f"seed {seed}, fault {index + 1} of {faults}"
        if actions is None and "driver.between_steps" in points and rng.random() < 1 / 8 and steps >= 3 and resumable:
            step = rng.randrange(2, steps)  # killed after step k: checkpoints 1..k, an older one than the damaged
            fault = Fault("driver.between_steps", step, "kill", marker, 0.0, campaign)
            drawn.append(Injection(index, fault, rng.choice(CORRUPTIONS)))
            continue
        point = rng.choice(points)
        action = rng.choice(menu[point])
        if point in ("rollout.evaluate", *CHECKPOINT_POINTS) and spans.get(point):
            step = rng.choice(sorted(spans[point]))  # the versions validated, the steps the cadence saves at
        else:
            step = rng.randrange(1, steps + 1) if point in CHECKPOINT_POINTS else rng.randrange(0, steps)
        work_s = spans.get(point, {}).get(step, UNTIMED_WORK_S)
        delay = round(rng.uniform(0.0, 1.0) * work_s, 3) if action not in ("enospc", "short_write", "kill_gcs") else 0.0
        drawn.append(Injection(index, Fault(point, step, action, marker, delay, campaign)))
    return drawn


# A role's call that, killed, Relay restarts the actor for and sends again: the second kill meets the call sent again.
RETRIED_CALLS = ("rollout.generate", "reward.score", "actor_ref.compute_log_probs", "tools.call", "reward_model.score")


def recovery_pairs(points: list[str], steps: int) -> list[tuple[str, str, range]]:
    """The (first point, follow-up point, steps) pairs a run with ``points`` offers, each follow-up inside the
    recovery its first kill sets off: the call Relay sends again to the restarted actor; the synced weights Relay
    gives a restarted rollout (its ``rollout.load_weights`` reports the version before the step); the checkpoint
    ``--resume`` loads after the driver or the learner was killed (``learner.load_checkpoint`` at the newest
    checkpoint's step, ``step_<s>`` with a checkpoint every step).

    >>> for first, second, steps in recovery_pairs(["rollout.generate", "learner.update"], 3):
    ...     print(first, second, list(steps))
    rollout.generate rollout.generate [0, 1, 2]
    rollout.generate rollout.load_weights [1, 2]
    learner.update learner.load_checkpoint [1, 2]
    """
    pairs = [(p, p, range(steps)) for p in RETRIED_CALLS if p in points]
    if "rollout.generate" in points:
        pairs.append(("rollout.generate", "rollout.load_weights", range(1, steps)))
    pairs += [(p, "learner.load_checkpoint", range(1, steps)) for p in ("driver.between_steps", "learner.update")]
    return [(a, b, r) for a, b, r in pairs if a in points and len(r)]


def draw_in_recovery(seed: int, faults: int, steps: int, points: list[str], out: Path) -> list[Injection]:
    """``faults`` kills drawn from ``seed``, each with a second kill that follows it into its recovery
    (:func:`recovery_pairs`; :attr:`relay.faults.Fault.after`), both at their point (no delay).

    >>> [(i.fault.point, i.fault.step, i.follow_up.point, i.follow_up.step)
    ...  for i in draw_in_recovery(5, 2, 3, ["reward.score", "driver.between_steps"], Path("/o"))]
    [('driver.between_steps', 2, 'learner.load_checkpoint', 2), ('reward.score', 1, 'reward.score', 1)]
    """
    rng = random.Random(seed)
    pairs = recovery_pairs(points, steps)
    drawn = []
    for index in range(faults):
        first_point, second_point, steps_drawn = rng.choice(pairs)
        step = rng.choice(steps_drawn)
        campaign = f"seed {seed}, fault {index + 1} of {faults} (in recovery)"
        first = Fault(first_point, step, "kill", str(out / f"fault-{index:03d}.fired"), 0.0, campaign)
        second_step = step - 1 if second_point == "rollout.load_weights" else step
        marker = str(out / f"fault-{index:03d}.second.fired")
        second = Fault(second_point, second_step, "kill", marker, 0.0, campaign, after=first.marker)
        drawn.append(Injection(index, first, follow_up=second))
    return drawn


@dataclass(frozen=True)
class Draw:
    """What a campaign draws its faults from (:func:`draw_campaign`)."""

    seed: int
    faults: int
    steps: int
    node_loss: bool = False
    actions: tuple[str, ...] | None = None
    points: tuple[str, ...] | None = None  # only these of the run's points
    in_recovery: bool = False  # each kill followed by a second inside its recovery (draw_in_recovery)
    head_loss: bool = False  # kill_gcs on the driver's points
