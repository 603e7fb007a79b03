"""The learner's phase deadlines (relay/learner/watchdog.py): a phase that outlives ``collective_timeout_s`` hands
one message naming the host and the phase to ``on_expire``; a phase that ends in time, a single process and no
timeout never do."""

import threading
import time
from collections.abc import Callable

import pytest

from relay.learner.watchdog import PhaseWatchdog, expiry_message


def _recorder() -> tuple[list[str], threading.Event, Callable[[str], None]]:
    messages: list[str] = []
    fired = threading.Event()

    def on_expire(message: str) -> None:
        messages.append(message)
        fired.set()

    return messages, fired, on_expire


def test_a_phase_past_its_deadline_names_the_host_and_the_phase() -> None:
    messages, fired, on_expire = _recorder()
    watchdog = PhaseWatchdog(0.05, process=1, processes=2, on_expire=on_expire)
    with watchdog.phase("update"):
        assert fired.wait(5.0)  # the body is still running when the timer fires
    assert messages == [expiry_message(1, 2, "update", 0.05)]
    assert messages[0].startswith("learner host 1 of 2 (JAX process 1 on ")
    assert "the update did not finish within learner.collective_timeout_s=0.05 s" in messages[0]


def test_a_phase_that_ends_in_time_cancels_its_timer_even_on_an_exception() -> None:
    messages, _, on_expire = _recorder()
    watchdog = PhaseWatchdog(0.2, process=0, processes=2, on_expire=on_expire)
    with watchdog.phase("update"):
        pass
    with pytest.raises(RuntimeError), watchdog.phase("checkpoint save"):
        raise RuntimeError("the save failed by itself")
    time.sleep(0.4)
    assert messages == []
    assert not [t for t in threading.enumerate() if t.name.startswith("learner-watchdog-")]


@pytest.mark.parametrize(("timeout", "processes"), [(None, 2), (0.01, 1)])
def test_no_timeout_or_a_single_process_has_no_deadline(timeout: float | None, processes: int) -> None:
    messages, _, on_expire = _recorder()
    watchdog = PhaseWatchdog(timeout, process=0, processes=processes, on_expire=on_expire)
    assert watchdog.timeout_s is None
    with watchdog.phase("update"):
        time.sleep(0.1)
    assert messages == []


@pytest.mark.parametrize("timeout", [0, -1.0])
def test_a_timeout_must_be_positive(timeout: float) -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        PhaseWatchdog(timeout, 0, 2)


def test_the_watchdog_fires_after_the_timeout_not_before() -> None:
    """The deadline counts from the phase's start."""
    fired: list[float] = []
    done = threading.Event()

    def on_expire(message: str) -> None:
        fired.append(time.monotonic() - start)
        done.set()

    watchdog = PhaseWatchdog(0.3, 0, 2, on_expire=on_expire)
    start = time.monotonic()
    with watchdog.phase("update"):
        assert done.wait(10.0)  # the body outlives the deadline however loaded the machine
    assert len(fired) == 1 and fired[0] >= 0.3
