"""trainer.py as a user runs it: config printing and config errors, with no Ray and no traceback."""

import os
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
        "train.micro_batch_size=6",
        "--print-config",
    )
    assert out.returncode == 0, out.stderr
    assert "'n': 6" in out.stdout and "max_response_length: 32" in out.stdout


def test_bad_key_exits_2_without_traceback() -> None:
    out = _run("--set", "rollout.batch_sze=4", "--print-config")
    assert out.returncode == 2
    assert "unknown config key 'rollout.batch_sze'" in out.stderr and "did you mean 'rollout.batch_size'" in out.stderr
    assert "Traceback" not in out.stderr


def test_missing_model_dir_exits_2_before_ray(tmp_path) -> None:
    out = _run("--set", f"model.path={tmp_path / 'nowhere'}")
    assert out.returncode == 2
    assert "model.path=" in out.stderr and "no config.json" in out.stderr
    assert "Ray" not in out.stderr and "Traceback" not in out.stderr


def test_legacy_key_and_non_dividing_micro_batch_exit_2() -> None:
    out = _run("--set", "rollout.prompt_batch_size=4", "--print-config")
    assert (
        out.returncode == 2
        and "'rollout.prompt_batch_size'" in out.stderr
        and "is no longer a config key" in out.stderr
    )
    out = _run("--set", "train.micro_batch_size=3", "--print-config")
    assert out.returncode == 2 and "train.micro_batch_size=3 must divide derived.local_batch=16" in out.stderr
    assert "Traceback" not in out.stderr


def test_explain_and_env_overrides() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "trainer.py"), "--explain"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        env={**os.environ, "STEPS": "9"},
    )
    assert out.returncode == 0, out.stderr
    assert "trainer.total_training_steps: 9" in out.stdout and "# env STEPS" in out.stdout


def test_valid_but_unsupported_preset_is_refused_before_ray() -> None:
    out = _run("--config", "configs/gsm8k_qwen25_3b_4gpu.yaml")
    assert out.returncode == 2
    assert "not supported by this build yet" in out.stderr and "GPU roles are not placed yet" in out.stderr
