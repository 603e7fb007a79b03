"""Two JAX processes of 4 CPU devices each (gloo, no Ray) run an 8-device program, one host arriving 40 s after the
other, as a slow compile on a loaded host makes it: with :func:`relay.learner.peers.wait_for_peers` between the
compile and the first run both finish; without it the first run fails in gloo's own rendezvous (the known-bad
case, slow: it fails or hangs)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from relay.repo import REPO_ROOT

LATE_S = 40  # past gloo's ~30 s rendezvous deadline

WORKER = """
import sys, time
import numpy as np
import jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from relay.learner.peers import wait_for_peers

rank, port, late, barrier = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4] == "1"
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=rank)
mesh = Mesh(np.array(jax.devices()), ("d",))
x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("d")), np.arange(4, dtype=np.float32) + 4 * rank)
total = jax.jit(jnp.sum, out_shardings=NamedSharding(mesh, P())).lower(x).compile()
if rank == 1:
    time.sleep(late)  # a slower compile
if barrier:
    wait_for_peers("compiled-sum", 300)
print(f"sum {float(total(x)):g}", flush=True)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_pair(tmp_path, barrier: bool, timeout_s: float = 240) -> list[subprocess.CompletedProcess]:
    """Both processes' results; one still running after ``timeout_s`` seconds is killed (returncode -9)."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": str(REPO_ROOT),
        "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
    }
    port = str(_free_port())
    argv = [[sys.executable, str(script), str(rank), port, str(LATE_S), str(int(barrier))] for rank in range(2)]
    procs = [subprocess.Popen(a, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for a in argv]
    done = []
    for p, a in zip(procs, argv, strict=True):
        try:
            out, err = p.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        done.append(subprocess.CompletedProcess(a, p.returncode, out, err))
    return done


def test_hosts_that_wait_for_each_other_after_compiling_run_the_program_however_late_one_is(tmp_path) -> None:
    done = _run_pair(tmp_path, barrier=True)
    for d in done:
        assert d.returncode == 0 and "sum 28" in d.stdout, d.stderr[-3000:]


@pytest.mark.slow
def test_without_the_barrier_a_host_late_by_more_than_gloos_deadline_fails_the_first_run(tmp_path) -> None:
    """Gloo's rendezvous either fails (``Gloo context initialization failed``) or leaves a host waiting: one of
    the two does not finish within 120 s, where the barrier's run takes about 45 s."""
    done = _run_pair(tmp_path, barrier=False, timeout_s=120)
    assert any(d.returncode != 0 for d in done), [d.stdout for d in done]
