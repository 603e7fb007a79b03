"""DAPO's dynamic sampling on the driver: sample, grade, keep the groups with reward variance, and sample
more prompts in extra passes until the step has ``rollout.batch_size`` of them.

With ``algorithm.filter_groups.enable`` a step's phases before the update run as:

    pass 0:  rollout(step's prompts) -> reward -> split groups (signal | constant)
    pass k:  rollout(more prompts)   -> reward -> split          while signal < wanted and k <= max_extra_passes
    then:    the first ``wanted`` signal groups (+ constant ones if the passes ran out) -> actor_ref log-probs

The reference forward runs once, on the trained rows only (not beside grading as in the unfiltered
step): on GSM8K with a small model three quarters of the groups are constant, and their reference
log-probs would be thrown away. Signal groups sampled beyond ``wanted`` are dropped (their prompts are
consumed, as in DAPO); the data cursor moves past every prompt sampled, so ``--resume`` continues after
them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from driver import phases
from relay.data_proto import DataProto
from relay.grpo.group_filter import extra_pass_size, rows_of, split_groups
from relay.rollout_batch import merge_rollout_parts

MorePrompts = Callable[[int, int], DataProto]
# algorithm.filter_groups.metric -> the reward role's per-row field it reads
METRIC_FIELDS = {"score": "scores", "acc": "acc"}


class ExtraPrompts:
    """Draws a step's extra prompt passes from ``draw(size, sample_pass)`` once each: when a role dies and
    the driver runs the step's phases again, pass ``k`` gets the prompts it got the first time (already
    taken from the data cursor), whatever size the retry asks for, so the cursor moves exactly as in an
    uninterrupted run."""

    def __init__(self, draw: MorePrompts) -> None:
        self._draw = draw
        self._passes: dict[int, DataProto] = {}

    def __call__(self, size: int, sample_pass: int) -> DataProto:
        if sample_pass not in self._passes:
            self._passes[sample_pass] = self._draw(size, sample_pass)
        return self._passes[sample_pass]


def sum_pass_metrics(per_pass: list[dict[str, float]]) -> dict[str, float]:
    """One step's role metrics from several sequential passes: ``timing/*`` add up (the passes ran one after
    another), ``memory/*`` and ``*_max`` take the largest, anything else is the mean."""
    out: dict[str, float] = {}
    for key in dict.fromkeys(k for m in per_pass for k in m):
        values = [m[key] for m in per_pass if key in m]
        if key.startswith("timing/"):
            out[key] = float(sum(values))
        elif key.startswith("memory/") or key.endswith("_max"):
            out[key] = float(max(values))
        else:
            out[key] = float(np.mean(values))
    return out


def collect_filtered(
    roles: Any, prompts: DataProto, cfg: Any, step: int, m: dict[str, float], more_prompts: MorePrompts
) -> DataProto:
    """The step's trained rows with rollout, reward and actor_ref fields (before the advantage); the
    ``filter/*`` and phase metrics go into ``m``."""
    fc = cfg.algorithm.filter_groups
    field = METRIC_FIELDS[fc.metric]
    wanted = len(prompts)
    parts: list[DataProto] = []
    pass_metrics: list[dict[str, float]] = []
    sampled_scores, sampled_acc = [], []
    kept = sampled = 0
    seconds = {"rollout": 0.0, "reward": 0.0, "extra": 0.0}
    current, sample_pass = prompts, 0
    while True:
        t0 = time.perf_counter()
        gen = phases.rollout(roles, current, step, m, sample_pass)
        t1 = time.perf_counter()
        rw = phases.gather_reward(phases.submit_reward(roles, gen, cfg, step))
        t2 = time.perf_counter()
        seconds["rollout"] += t1 - t0
        seconds["reward"] += t2 - t1
        if sample_pass:
            seconds["extra"] += t2 - t0
        pass_metrics.append({**phases.pop_metrics(gen), **phases.pop_metrics(rw)})
        scored = gen.union(rw)
        parts.append(scored)
        sampled_scores.append(scored.batch["scores"])
        sampled_acc.append(scored.batch["acc"])
        kept += len(split_groups(scored.batch[field], scored.non_tensor["uid"]).signal)
        sampled += len(current)
        if kept >= wanted or sample_pass >= fc.max_extra_passes:
            break
        sample_pass += 1
        current = more_prompts(extra_pass_size(wanted - kept, sampled, kept, wanted), sample_pass)
    merged = merge_rollout_parts(parts)
    merged.meta_info.pop("metrics", None)
    split = split_groups(merged.batch[field], merged.non_tensor["uid"])
    short = max(0, wanted - len(split.signal))
    batch = merged[rows_of(split.signal[:wanted] + split.constant[:short])]
    t3 = time.perf_counter()
    lp = phases.gather_log_probs(roles, batch, phases.submit_log_probs(roles, batch, step), m)
    seconds["reward"] += time.perf_counter() - t3
    m["actor_ref/ref_forward"] = 0.0  # the role reports 1.0 when it ran the reference forward
    m.update(sum_pass_metrics(pass_metrics))
    if lp is not None:
        m.update(phases.pop_metrics(lp))
        batch = batch.union(lp)
    scores, acc = np.concatenate(sampled_scores), np.concatenate(sampled_acc)
    m.update(
        {
            "timing/rollout": seconds["rollout"],
            "timing/actor_ref_and_reward": seconds["reward"],
            "filter/groups_kept": float(min(len(split.signal), wanted)),
            "filter/groups_dropped": float(len(split.constant) - short),
            "filter/groups_filled": float(short),
            "filter/groups_surplus": float(max(0, len(split.signal) - wanted)),
            "filter/extra_passes": float(sample_pass),
            "filter/prompts_sampled": float(sampled),
            "filter/extra_rollout_seconds": seconds["extra"],
            "filter/sampled_reward_mean": float(scores.mean()),
            "filter/sampled_accuracy": float(acc.mean()),
        }
    )
    return batch
