"""Joining Ray is bounded: an address that refuses connections is an error at once, and a head that accepts
connections but never answers ends ``trainer.py`` after ``trainer.ray_init_timeout_s`` with the address, not a
silent wait (``ray.init`` alone was still retrying after 200 s)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from placement.connect import unreachable
from relay.repo import REPO_ROOT


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_refused_address_is_named_and_a_listening_one_passes() -> None:
    port = _closed_port()
    assert f"nothing accepts connections at 127.0.0.1:{port}" in unreachable(f"127.0.0.1:{port}")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        assert unreachable(f"127.0.0.1:{listener.getsockname()[1]}") is None


def _trainer(tiny_model_dir, address: str, timeout_s: float) -> tuple[subprocess.CompletedProcess, float]:
    cmd = [
        sys.executable,
        "trainer.py",
        "--config",
        "configs/tiny.yaml",
        "--set",
        f"model.path={tiny_model_dir}",
        "--set",
        f"trainer.ray_init_timeout_s={timeout_s}",
        "--set",
        "trainer.output_dir=/tmp/relay-connect-test",
    ]
    env = {**os.environ, "RAY_ADDRESS": address, "PYTHONPATH": str(REPO_ROOT)}
    start = time.monotonic()
    out = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    return out, time.monotonic() - start


def test_the_trainer_names_a_refused_address(tiny_model_dir) -> None:
    port = _closed_port()
    out, _ = _trainer(tiny_model_dir, f"127.0.0.1:{port}", 300)
    assert out.returncode == 1
    assert f"nothing accepts connections at 127.0.0.1:{port}" in out.stderr.strip().splitlines()[-1]


def test_the_trainer_gives_up_on_a_head_that_never_answers(tiny_model_dir) -> None:
    with socket.socket() as silent:  # accepts (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        out, seconds = _trainer(tiny_model_dir, address, 5)
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert f"ray.init did not join the cluster at {address}" in last and "ray_init_timeout_s=5" in last
    assert seconds < 120  # the import and the checks before Ray, plus the 5 s bound
