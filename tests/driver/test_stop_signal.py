"""SIGTERM asks the run to stop after the step in flight; a second one gets the handler from before."""

from __future__ import annotations

import os
import signal

from driver.stop_signal import EXIT_STOPPED, GracefulStop


def test_the_first_sigterm_is_noted_and_the_second_reaches_the_previous_handler() -> None:
    seen: list[int] = []
    before = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        with GracefulStop() as stop:
            assert not stop.requested
            os.kill(os.getpid(), signal.SIGTERM)
            assert stop.requested and seen == []
            os.kill(os.getpid(), signal.SIGTERM)  # a second one: the handler from before
            assert seen == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is not stop._on_sigterm
    finally:
        signal.signal(signal.SIGTERM, before)


def test_leaving_the_loop_puts_the_previous_handler_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with GracefulStop() as stop:
        assert signal.getsignal(signal.SIGTERM) == stop._on_sigterm
    assert signal.getsignal(signal.SIGTERM) == before
    assert EXIT_STOPPED == 143
    assert stop.reason(4, 41.2) == "stopping before step 4: SIGTERM received; the last step took 41 s"
