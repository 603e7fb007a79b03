"""A wall-clock budget for a training run: stop before the step that would overrun it.

The trainer (``trainer.time_budget_minutes``) and the TRL baseline of ``benchmarks.learning.relay_vs_trl`` use the same
rule, so "equal wall-clock" means the same thing for both: the clock starts when the first step starts (model
loading and role start-up are not counted), and another step starts only if the time so far plus the last
step's length still fits in the budget.

Worked example, budget 10 min: steps of 4.0 and 3.5 min end at 7.5 min; 7.5 + 3.5 = 11 > 10, so the run stops
after two steps (at 7.5 min) instead of overrunning to ~11 min. A step that grows past the last one's length
can still overrun; ``overrun_s`` reports by how much.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class WallClockBudget:
    """``minutes=None`` is no budget: :meth:`next_step_fits` is always True."""

    def __init__(self, minutes: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        if minutes is not None and minutes <= 0:
            raise ValueError(f"a wall-clock budget must be > 0 minutes, got {minutes}")
        self.limit_s = None if minutes is None else 60.0 * minutes
        self._clock = clock
        self._start: float | None = None
        self._step_start: float | None = None
        self.last_step_s = 0.0
        self.steps = 0

    def start(self) -> None:
        """Start the clock (idempotent: the first call wins)."""
        if self._start is None:
            self._start = self._clock()

    def step_started(self) -> None:
        self.start()
        self._step_start = self._clock()

    def step_ended(self) -> None:
        if self._step_start is None:
            raise RuntimeError("step_ended() without step_started()")
        self.last_step_s = self._clock() - self._step_start
        self._step_start = None
        self.steps += 1

    def elapsed_s(self) -> float:
        return 0.0 if self._start is None else self._clock() - self._start

    def next_step_fits(self) -> bool:
        """Whether another step of the last step's length ends inside the budget."""
        if self.limit_s is None:
            return True
        return self.elapsed_s() + self.last_step_s <= self.limit_s

    def overrun_s(self) -> float:
        """Seconds past the budget so far (0 inside it, or without a budget)."""
        return 0.0 if self.limit_s is None else max(0.0, self.elapsed_s() - self.limit_s)
