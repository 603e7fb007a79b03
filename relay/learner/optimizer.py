"""The one builder from ``train.optimizer`` to an optax transformation (and its learning-rate schedule)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optax


def build_schedule(s: Mapping[str, Any], total_steps: int, warmup_steps: int) -> optax.Schedule:
    """``constant``: linear warmup from ``init_value`` to ``peak_value``, then flat.
    ``warmup_cosine``: the same warmup, then cosine decay to ``end_value`` at ``total_steps``.

    Example: peak 1e-6, init 0, warmup 2 steps, constant -> lr 0, 5e-7, 1e-6, 1e-6, ...
    """
    peak = float(s["peak_value"])
    if s["type"] == "warmup_cosine":
        return optax.warmup_cosine_decay_schedule(
            init_value=float(s["init_value"]),
            peak_value=peak,
            warmup_steps=warmup_steps,
            decay_steps=max(total_steps, warmup_steps + 1),
            end_value=float(s["end_value"]),
        )
    if s["type"] != "constant":
        raise ValueError(f"train.optimizer.lr_schedule.type={s['type']!r}: must be constant or warmup_cosine")
    if warmup_steps <= 0:
        return optax.constant_schedule(peak)
    warmup = optax.linear_schedule(float(s["init_value"]), peak, warmup_steps)
    return optax.join_schedules([warmup, optax.constant_schedule(peak)], [warmup_steps])


def build_optimizer(
    opt: Mapping[str, Any], total_steps: int, warmup_steps: int
) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """Global-norm clipping then ``adamw`` | ``lion`` | ``sgd`` on the schedule."""
    schedule = build_schedule(opt["lr_schedule"], total_steps, warmup_steps)
    name = opt["name"]
    if name == "adamw":
        inner = optax.adamw(schedule, b1=opt["b1"], b2=opt["b2"], eps=opt["eps"], weight_decay=opt["weight_decay"])
    elif name == "lion":
        inner = optax.lion(schedule, b1=opt["b1"], b2=opt["b2"], weight_decay=opt["weight_decay"])
    elif name == "sgd":
        inner = optax.chain(optax.add_decayed_weights(opt["weight_decay"]), optax.sgd(schedule))
    else:
        raise ValueError(f"train.optimizer.name={name!r}: must be adamw, lion or sgd")
    return optax.chain(optax.clip_by_global_norm(opt["clip_norm"]), inner), schedule
