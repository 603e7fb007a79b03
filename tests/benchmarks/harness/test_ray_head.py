"""The isolated head starts on a machine where no Ray ran yet: no ``~/.ray/auth_token``."""

from __future__ import annotations

import subprocess
import sys

from benchmarks.harness.ray_head import free_ports, isolated_head


def test_an_isolated_head_starts_and_takes_a_driver_where_home_has_no_token(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    with isolated_head() as head:
        probe = "import ray; ray.init(); print(int(ray.cluster_resources()['CPU']))"
        out = subprocess.run([sys.executable, "-c", probe], env=head.driver_env, capture_output=True, text=True,
                             timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "2"
    assert not (home / ".ray").exists()  # the head's token is its own, in its temp dir


def test_the_ports_of_one_head_are_distinct():
    """Ports chosen one socket at a time, each released before the next, repeat: over 200 names in 34 of 50 draws
    here (the known-bad case this rejects), and ``ray start`` refuses a head whose dashboard and agent share one."""
    ports = free_ports([f"c{i}" for i in range(200)])
    assert len(set(ports.values())) == 200 and list(ports) == [f"c{i}" for i in range(200)]
