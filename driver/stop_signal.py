"""A graceful stop on SIGTERM: the run ends after the step it is in, with a checkpoint, and says how to go on.

SIGTERM is how a run is asked to stop: a preempted VM, Kubernetes evicting a pod, ``ray job stop``. Each gives a
grace period before SIGKILL: ``ray job stop`` sends SIGTERM to the driver and its child processes and sends SIGKILL
after ``RAY_JOB_STOP_WAIT_TIME_S`` seconds, 3 by default (ray 2.60.0, ``ray/dashboard/modules/job/
job_supervisor.py``, ``DEFAULT_RAY_JOB_STOP_WAIT_TIME_S``). ``ray.init`` installs a handler that raises
``SystemExit`` wherever the driver is (``ray/_private/worker.py``, ``sigterm_handler``): the step in flight and a
checkpoint being written were abandoned, with no word on how to go on.

:class:`GracefulStop` replaces that handler for the step loop: the first SIGTERM is noted and the loop stops before
the next step; the step in flight finishes, is recorded, and a checkpoint is written (whatever
``trainer.save_freq``), then the run exits :data:`EXIT_STOPPED` with the resume command. A second SIGTERM gets the
previous handler (Ray's: the process ends at once). The grace period must cover the rest of a step and a
checkpoint (the message names the last step's seconds); when it does not, SIGKILL ends the run and ``--resume``
goes back to the newest checkpoint, as after any kill.

Worked example: ``ray job stop`` with ``RAY_JOB_STOP_WAIT_TIME_S=120`` during step 7 of a run with 40-second steps:
step 7 ends, ``checkpoints/step_000008`` is written, the run exits 143, and ``python trainer.py --resume <run>``
continues at step 8 as if it had never stopped.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType
from typing import Any

EXIT_STOPPED = 128 + signal.SIGTERM  # what a shell reports for a process ended by SIGTERM


class GracefulStop:
    """A context manager around the step loop: :attr:`requested` turns True on the first SIGTERM. Outside the
    main thread (Python delivers signals there only) it installs nothing."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> GracefulStop:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous if self._previous is not None else signal.SIG_DFL)
            self._installed = False

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
        signal.signal(signal.SIGTERM, self._previous if self._previous is not None else signal.SIG_DFL)
        self._installed = False
        # os.write: a signal handler may run inside another write to the terminal
        os.write(2, b"received SIGTERM: stopping after this step with a checkpoint (another SIGTERM ends it now)\n")

    def reason(self, step: int, last_step_s: float | None) -> str:
        """The stop line for the terminal, before ``step``."""
        took = f"; the last step took {last_step_s:.0f} s" if last_step_s else ""
        return f"stopping before step {step}: SIGTERM received{took}"
