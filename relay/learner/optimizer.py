"""The one builder from ``train.optimizer`` to an optax transformation (and its learning-rate schedule).

:data:`OPTIMIZERS` and :data:`LR_SCHEDULES` map the config's names (``train.optimizer.name``,
``train.optimizer.lr_schedule.type``) to their builders; relay/config/validate.py reads the names from them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import optax

# (lr_schedule section, total optimizer steps, warmup steps) -> schedule
ScheduleBuilder = Callable[[Mapping[str, Any], int, int], optax.Schedule]
# (optimizer section, schedule) -> the optimizer, before global-norm clipping
OptimizerBuilder = Callable[[Mapping[str, Any], optax.Schedule], optax.GradientTransformation]


def _constant(s: Mapping[str, Any], total_steps: int, warmup_steps: int) -> optax.Schedule:
    peak = float(s["peak_value"])
    if warmup_steps <= 0:
        return optax.constant_schedule(peak)
    warmup = optax.linear_schedule(float(s["init_value"]), peak, warmup_steps)
    return optax.join_schedules([warmup, optax.constant_schedule(peak)], [warmup_steps])


def _warmup_cosine(s: Mapping[str, Any], total_steps: int, warmup_steps: int) -> optax.Schedule:
    return optax.warmup_cosine_decay_schedule(
        init_value=float(s["init_value"]),
        peak_value=float(s["peak_value"]),
        warmup_steps=warmup_steps,
        decay_steps=max(total_steps, warmup_steps + 1),
        end_value=float(s["end_value"]),
    )


LR_SCHEDULES: dict[str, ScheduleBuilder] = {"constant": _constant, "warmup_cosine": _warmup_cosine}


def _adamw(opt: Mapping[str, Any], schedule: optax.Schedule) -> optax.GradientTransformation:
    return optax.adamw(schedule, b1=opt["b1"], b2=opt["b2"], eps=opt["eps"], weight_decay=opt["weight_decay"])


def _lion(opt: Mapping[str, Any], schedule: optax.Schedule) -> optax.GradientTransformation:
    return optax.lion(schedule, b1=opt["b1"], b2=opt["b2"], weight_decay=opt["weight_decay"])


def _sgd(opt: Mapping[str, Any], schedule: optax.Schedule) -> optax.GradientTransformation:
    return optax.chain(optax.add_decayed_weights(opt["weight_decay"]), optax.sgd(schedule))


OPTIMIZERS: dict[str, OptimizerBuilder] = {"adamw": _adamw, "lion": _lion, "sgd": _sgd}


def build_schedule(s: Mapping[str, Any], total_steps: int, warmup_steps: int) -> optax.Schedule:
    """``constant``: linear warmup from ``init_value`` to ``peak_value``, then flat.
    ``warmup_cosine``: the same warmup, then cosine decay to ``end_value`` at ``total_steps``.

    Example: peak 1e-6, init 0, warmup 2 steps, constant -> lr 0, 5e-7, 1e-6, 1e-6, ...
    """
    if s["type"] not in LR_SCHEDULES:
        raise ValueError(f"train.optimizer.lr_schedule.type={s['type']!r}: must be one of {', '.join(LR_SCHEDULES)}")
    return LR_SCHEDULES[s["type"]](s, total_steps, warmup_steps)


def build_optimizer(
    opt: Mapping[str, Any], total_steps: int, warmup_steps: int
) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """Global-norm clipping then ``adamw`` | ``lion`` | ``sgd`` on the schedule."""
    schedule = build_schedule(opt["lr_schedule"], total_steps, warmup_steps)
    name = opt["name"]
    if name not in OPTIMIZERS:
        raise ValueError(f"train.optimizer.name={name!r}: must be one of {', '.join(OPTIMIZERS)}")
    return optax.chain(optax.clip_by_global_norm(opt["clip_norm"]), OPTIMIZERS[name](opt, schedule)), schedule
