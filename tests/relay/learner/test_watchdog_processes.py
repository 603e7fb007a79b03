"""Two JAX processes joined with jax.distributed (gloo on CPU, no Ray): when one stops in the middle of a phase,
the other's collective would wait forever; its :class:`relay.learner.watchdog.PhaseWatchdog` ends it within
the timeout, with one line naming its host and the phase."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

from relay.learner.watchdog import EXIT_CODE
from relay.repo import REPO_ROOT

TIMEOUT_S = 4.0

# One learner-like process: join the job, one collective that both processes finish, then process 1 stops
# itself (SIGSTOP: its connections stay open, so its peer's collective neither finishes nor fails) and
# process 0 enters the next collective under the watchdog.
WORKER = """
import os, signal, sys, time
import numpy as np
import jax
from jax.experimental import multihost_utils
from relay.learner.watchdog import PhaseWatchdog

rank, port, timeout = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=rank)
watchdog = PhaseWatchdog(timeout, jax.process_index(), jax.process_count())
with watchdog.phase("start-up gather"):
    multihost_utils.process_allgather(np.int32(rank))
print(f"joined {rank}", flush=True)
if rank == 1:
    os.kill(os.getpid(), signal.SIGSTOP)
print(f"entered {time.time()}", flush=True)
with watchdog.phase("update"):
    multihost_utils.process_allgather(np.int32(rank))
print(f"finished {rank}", flush=True)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_host_whose_peer_stopped_mid_update_exits_naming_itself_and_the_phase(tmp_path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(REPO_ROOT), "XLA_FLAGS": ""}
    port = str(_free_port())
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(rank), port, str(TIMEOUT_S)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    try:
        out, err = procs[0].communicate(timeout=180)
        ended = time.time()
        stopped = procs[1].poll() is None  # still there, stopped: it never left the job
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
    assert "joined 0" in out and "finished" not in out, (out, err)
    assert procs[0].returncode == EXIT_CODE, (procs[0].returncode, err[-2000:])
    assert stopped
    entered = float(out.split("entered ")[1].split()[0])
    # Measured 4.35 s after entering the phase with TIMEOUT_S=4 (the rest: the exit and the pipe's close).
    assert TIMEOUT_S <= ended - entered < TIMEOUT_S + 10, ended - entered
    lines = [line for line in err.splitlines() if "collective_timeout_s" in line]
    assert len(lines) == 1, err[-2000:]
    assert lines[0].startswith("learner host 0 of 2 (JAX process 0 on ")
    assert f"the update did not finish within learner.collective_timeout_s={TIMEOUT_S:g} s" in lines[0]
