"""Which state an emergency checkpoint holds: before the failed step, or after it once its update was applied."""

from __future__ import annotations

from driver.run_record import emergency_point


def test_a_failure_before_the_update_checkpoints_the_state_before_the_step() -> None:
    assert emergency_point(4, {"pos": 16}, 3, {"pos": 20}) == (4, {"pos": 16})
    assert emergency_point(0, {"pos": 0}, None, {"pos": 4}) == (0, {"pos": 0})  # no update yet in this run


def test_a_failure_after_the_update_checkpoints_the_state_after_the_step() -> None:
    """The learner holds step 4's update: the checkpoint is step 5's, with the cursor past step 4's prompts, so a
    resume never applies the update twice."""
    assert emergency_point(4, {"pos": 16}, 4, {"pos": 20}) == (5, {"pos": 20})
