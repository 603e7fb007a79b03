"""trainer.py as a user runs it: config printing and config errors, with no Ray and no traceback."""

import subprocess
import sys

from trainer import REPO


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "trainer.py"), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


def test_print_config_merges_preset_and_overrides() -> None:
    out = _run(
        "--config",
        "configs/tiny.yaml",
        "--set",
        "rollout.n=6",
        "--set",
        "learner.micro_batch_size=6",
        "--print-config",
    )
    assert out.returncode == 0, out.stderr
    assert "'n': 6" in out.stdout and "max_response_length: 32" in out.stdout


def test_bad_key_exits_2_without_traceback() -> None:
    out = _run("--set", "rollout.batch_sze=4", "--print-config")
    assert out.returncode == 2
    assert (
        "unknown config key 'rollout.batch_sze'" in out.stderr
        and "did you mean 'rollout.batch_size'" in out.stderr
    )
    assert "Traceback" not in out.stderr


def test_missing_model_dir_exits_2_before_ray(tmp_path) -> None:
    out = _run("--set", f"model.path={tmp_path / 'nowhere'}")
    assert out.returncode == 2
    assert "model.path=" in out.stderr and "no config.json" in out.stderr
    assert "Ray" not in out.stderr and "Traceback" not in out.stderr
