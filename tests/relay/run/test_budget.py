"""The wall-clock budget's stop rule, on a fake clock."""

from __future__ import annotations

import pytest

from relay.run.budget import WallClockBudget


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _run_steps(budget: WallClockBudget, clock: FakeClock, minutes: list[float]) -> int:
    done = 0
    for length in minutes:
        if not budget.next_step_fits():
            break
        budget.step_started()
        clock.now += 60 * length
        budget.step_ended()
        done += 1
    return done


def test_the_docstring_example_stops_before_the_overrunning_step() -> None:
    clock = FakeClock()
    budget = WallClockBudget(10, clock)
    assert _run_steps(budget, clock, [4.0, 3.5, 3.5, 3.5]) == 2
    assert budget.elapsed_s() == pytest.approx(7.5 * 60) and budget.overrun_s() == 0.0


def test_the_clock_starts_at_the_first_step_and_a_longer_step_can_overrun() -> None:
    clock = FakeClock()
    budget = WallClockBudget(5, clock)
    clock.now += 1000  # start-up before the first step is not counted
    assert budget.elapsed_s() == 0.0 and budget.next_step_fits()
    assert _run_steps(budget, clock, [1.0, 1.0, 3.5, 1.0]) == 3
    assert budget.elapsed_s() == pytest.approx(5.5 * 60) and budget.overrun_s() == pytest.approx(30.0)


def test_no_budget_never_stops_and_a_bad_budget_is_refused() -> None:
    clock = FakeClock()
    budget = WallClockBudget(None, clock)
    assert _run_steps(budget, clock, [100.0] * 5) == 5 and budget.overrun_s() == 0.0
    with pytest.raises(ValueError, match="> 0 minutes, got 0"):
        WallClockBudget(0)
    with pytest.raises(RuntimeError, match="without step_started"):
        WallClockBudget(1).step_ended()
