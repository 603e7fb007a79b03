"""The driver's clock: one timer for the phases of a step, and the timing metrics derived from them.

Every wall time the driver reports goes through :class:`PhaseTimer`: ``with timer.phase("timing/update",
role="learner", span="update"):`` times the block into the metric ``timing/update`` and, given a role, records the
block as that role's busy span on the run's timeline (:mod:`relay.run.timeline`). :func:`derived_timing_metrics`
turns a step's phase times and the roles' own compute times into the figures both the on-policy and the pipelined
step report.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from relay.run import timeline


class PhaseTimer:
    """Wall seconds per metric key for one step; a phase that runs several times (dynamic sampling's passes) adds
    up. ``step`` labels the timeline spans.

    >>> timer = PhaseTimer(step=3)
    >>> with timer.phase("timing/advantage"):
    ...     pass
    >>> list(timer.metrics())
    ['timing/advantage']
    """

    def __init__(self, step: int) -> None:
        self.step = step
        self._seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, key: str, role: str | None = None, span: str | None = None) -> Iterator[None]:
        """Time the block into ``key``; with ``role``, also record it on the timeline as that role's ``span``
        (default: the key's last part)."""
        wall_start, start = time.time(), time.perf_counter()
        try:
            yield
        finally:
            self._seconds[key] = self._seconds.get(key, 0.0) + time.perf_counter() - start
            if role is not None:
                timeline.record(role, span or key.rsplit("/", 1)[-1], wall_start, time.time(), self.step)

    def metrics(self) -> dict[str, float]:
        """Every recorded key and its seconds."""
        return dict(self._seconds)


def collect_compute_seconds(m: Mapping[str, float], side_by_side: bool) -> float:
    """The roles' compute inside the phases before the update: the rollout's, then the actor_ref log-probs and the
    grading, which count once (the longer) when they ran side by side and added up when one waited for the other.

    Worked example: rollout 10 s, log-probs 4 s, grading 3 s: 14 s side by side, 17 s back to back.
    """
    pair = (m.get("timing/actor_ref_compute", 0.0), m.get("timing/reward_compute", 0.0))
    return m.get("timing/rollout_compute", 0.0) + (max(pair) if side_by_side else sum(pair))


def derived_timing_metrics(
    m: Mapping[str, float], *, collect_busy: float, sync_wall: float, sync_busy: float
) -> dict[str, float]:
    """The step's figures derived from its phase times (``timing/step``, ``sync/export_seconds``, the roles'
    ``timing/*_compute``), for the on-policy and the pipelined step alike.

    ``collect_busy``: the seconds of the step spent on the phases before the update (on-policy: the roles' compute,
    :func:`collect_compute_seconds`; pipelined: the wait for the collect that ran beside the last update).
    ``sync_wall``: the engines' load of the new weights as the driver saw it (on-policy: the sync phase's wall time;
    pipelined: the newest finished load, which ran in the collect thread). ``sync_busy``: the part of that load inside
    this step (on-policy: the slowest engine's own load time; pipelined: 0).

    - ``sync/seconds``: the learner's export plus ``sync_wall``;
    - ``timing/reward_share_of_step``: the reward role's compute over the step;
    - ``timing/driver_and_ray_overhead``: the step's wall time that no role's compute and no wait explains.

    Worked example: a 40 s step with collect 14 s, update 20 s, export 1 s, loads 2 s (sync wall 2.5 s), grading 3 s:
    ``sync/seconds`` 3.5, reward share 0.075, overhead 40 - (14 + 20 + 1 + 2) = 3.
    """
    step, export = m["timing/step"], m["sync/export_seconds"]
    busy = collect_busy + m.get("timing/update_compute", 0.0) + export + sync_busy
    return {
        "sync/seconds": export + sync_wall,
        "timing/reward_share_of_step": m.get("timing/reward_compute", 0.0) / step,
        "timing/driver_and_ray_overhead": max(0.0, step - busy),
    }
