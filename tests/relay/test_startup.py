"""The start-up pause of the garbage collector: off inside, restored after (also after an error), on every role."""

from __future__ import annotations

import gc
import inspect

import pytest

from relay.startup import collector_paused, start_up_with_collector_paused


def test_the_collector_is_off_inside_and_restored_after_an_error() -> None:
    @start_up_with_collector_paused
    def start() -> bool:
        return gc.isenabled()

    assert gc.isenabled() and start() is False and gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("a failed start")
    assert gc.isenabled()


def test_a_nested_pause_leaves_the_collector_to_the_outer_one() -> None:
    with collector_paused():
        with collector_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_every_role_and_the_drivers_data_stage_start_with_the_collector_paused() -> None:
    from driver.training_run import TrainingRun
    from roles.actor_ref import ActorRefWorker
    from roles.learner import LearnerWorker
    from roles.reward import RewardWorker
    from roles.rollout import RolloutWorker

    starts = [c.__init__ for c in (ActorRefWorker, LearnerWorker, RewardWorker, RolloutWorker)]
    for start in [*starts, TrainingRun.load_data]:
        assert inspect.unwrap(start) is not start, start.__qualname__
        assert inspect.getsource(start).lstrip().startswith("@start_up_with_collector_paused"), start.__qualname__
