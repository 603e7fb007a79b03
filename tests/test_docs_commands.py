"""The commands in README.md and docs/*.md run as written, so the docs cannot rot.

Every ``python …`` line of a fenced shell block is either run here (with its placeholders filled: a tiny run
for ``outputs/<run>``, the tiny model for ``/path/to/hf-model``) or matched by a rule in ``NOT_RUN`` that says
why it cannot run on this machine and which test covers it instead. A new command that is neither fails the test.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from relay.repo import REPO_ROOT

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(?:bash|sh|shell|console)?\n(.*?)^```", re.S | re.M)
COMMAND = re.compile(r"^(?:\$ )?(?:[A-Z_]+=\S+ )*(?:\.venv/bin/)?python ")

# (pattern, why it is not run here)
NOT_RUN: tuple[tuple[str, str], ...] = (
    (r"\[--", "a usage synopsis, not a command (its forms are run below)"),
    (r"<preset>|<head-ip>", "a placeholder for the user's own preset or cluster"),
    (r"--resume ", "trains: resuming is tests/test_trainer_resume.py"),
    (r"^python trainer\.py --config configs/gsm8k_smollm2_solver\.yaml$", "trains: tests/test_trainer_solver.py"),
    (r"^python trainer\.py --config configs/gsm8k_smollm2_tools\.yaml$", "trains: tests/test_trainer_agent.py"),
    (r"--set rollout\.replicas=2", "trains two engines: tests/roles/test_rollout_replicas.py"),
    (r"-m benchmarks\.", "a benchmark (minutes to hours): its results are in BENCHMARKS.md"),
    (r"^python submit\.py ", "submits a job to a running Ray head: tests/test_job_submit.py"),
    (r"^python -m driver\.evaluate --checkpoint outputs/<run>", "vLLM on a run: test_evaluate_on_a_run (slow)"),
    (r"placement\.on_cpu=true\s+--set model\.path=", "trains a preset on the CPU: tests/test_presets.py"),
)


def doc_commands() -> list[tuple[str, str]]:
    """``(file, command)`` for every python command in a fenced shell block, continuations joined."""
    out = []
    for path in DOCS:
        for block in FENCE.findall(path.read_text()):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                line = line.strip()
                if COMMAND.match(line):
                    out.append((path.name, re.sub(r"\s+#.*$", "", line).strip()))
    return out


def _why_not_run(command: str) -> str | None:
    return next((why for pattern, why in NOT_RUN if re.search(pattern, command)), None)


def _run(command: str, **fill: str) -> subprocess.CompletedProcess:
    for placeholder, value in fill.items():
        command = command.replace(placeholder, value)
    argv = shlex.split(command)
    argv[0] = sys.executable  # python / .venv/bin/python
    return subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)


RUNNABLE = [(f, c) for f, c in doc_commands() if _why_not_run(c) is None]


def test_every_command_is_run_or_says_why_not() -> None:
    commands = doc_commands()
    assert len(commands) >= 15, commands  # the extraction finds the README's commands
    runnable = {c for _, c in RUNNABLE}
    assert any("--print-plan" in c for c in runnable) and any("--print-config" in c for c in runnable)
    assert any("relay.run.summarize" in c for c in runnable) and any("driver.evaluate" in c for c in runnable)


@pytest.mark.parametrize(
    "command",
    [c for _, c in RUNNABLE if "outputs/<run>" not in c and "driver.evaluate" not in c],
)
def test_config_and_plan_commands_run_as_written(command: str) -> None:
    result = _run(command)
    assert result.returncode == 0, f"{command}\n{result.stderr[-2000:]}"
    assert "Traceback" not in result.stderr
    if "--print-config" in command:
        assert "derived:" in result.stdout
    if "train.per_device_micro_batch_size=1" in command:  # the README's worked batch-size example
        derived = result.stdout.split("derived:", 1)[1]
        assert "micro_batch_size: 4" in derived and "grad_accum_steps: 4" in derived
    if "--print-plan" in command:
        assert "fits: yes" in result.stdout


def test_summarize_and_evaluate_commands_on_a_tiny_run(ray_session, tiny_model_dir: Path, tmp_path: Path) -> None:
    """``relay.run.summarize outputs/<run>`` on a real one-step tiny run, and the HF-engine evaluation of a
    model directory (the tiny model for ``/path/to/hf-model``)."""
    from relay.config import load_config
    from trainer import train

    run_dir = tmp_path / "tiny-run"
    loaded = load_config(
        REPO_ROOT / "configs" / "tiny.yaml",
        [f"model.path={tiny_model_dir}", "trainer.total_training_steps=1", f"trainer.output_dir={tmp_path}"],
        environ={},
    )
    assert train(loaded, tiny_model_dir, run_dir) == 0
    commands = [c for _, c in RUNNABLE if "relay.run.summarize" in c or "driver.evaluate" in c]
    assert commands
    for command in commands:
        result = _run(command, **{"outputs/<run>": str(run_dir), "/path/to/hf-model": str(tiny_model_dir)})
        assert result.returncode == 0, f"{command}\n{result.stderr[-2000:]}"
        if "summarize" in command:
            assert "| step |" in result.stdout and (run_dir / "plots" / "reward.png").is_file()
        else:
            assert '"val/problems": 20.0' in result.stdout and '"val/format_rate_greedy"' in result.stdout


@pytest.mark.slow
def test_evaluate_on_a_run(ray_session, tiny_model_dir: Path, tmp_path: Path) -> None:
    """The README's ``driver.evaluate --checkpoint outputs/<run>…`` lines (vLLM, the run's own config)."""
    from relay.config import load_config
    from trainer import train

    run_dir = tmp_path / "tiny-run"
    overrides = [
        f"model.path={tiny_model_dir}",
        "trainer.total_training_steps=1",
        "trainer.save_freq=1",
        f"trainer.output_dir={tmp_path}",
        "trainer.val_samples=4",
    ]
    assert train(load_config(REPO_ROOT / "configs" / "tiny.yaml", overrides, environ={}), tiny_model_dir, run_dir) == 0
    for _, command in doc_commands():
        if command.startswith("python -m driver.evaluate --checkpoint outputs/<run>"):
            result = _run(command, **{"outputs/<run>": str(run_dir), "step_000020": "step_000001"})
            assert result.returncode == 0, f"{command}\n{result.stderr[-2000:]}"
            assert '"val/accuracy_greedy"' in result.stdout
