"""The driver's clock: one timer for the phases of a step, a validation and an evaluation.

Every wall time the driver reports goes through :class:`PhaseTimer`: ``with timer.phase("timing/update",
role="learner", span="update"):`` times the block into the metric ``timing/update`` and, given a role, records the
block as that role's busy span on the run's timeline (:mod:`relay.run.timeline`). The figures derived from the
phase times are in :mod:`driver.step_metrics`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
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
