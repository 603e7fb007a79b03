"""benchmarks.learning.screen_tasks: the band rule, the candidates' recipes (each one Relay accepts), the reproducing
command, and one candidate screened end to end on the tiny model (engine, grader and table)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.learning.screen_tasks import CANDIDATES, DEFAULT_CANDIDATES, command_line, in_band, row_line
from relay.repo import REPO_ROOT
from relay.tasks.reasoning_gym import check_options

pytest.importorskip("reasoning_gym")


def _metrics(greedy: float, pass_k: float, majority: float = 0.07) -> dict[str, float]:
    return {"val/lenient_accuracy_greedy": greedy, "val/lenient_pass@8": pass_k, "val/majority_baseline": majority}


@pytest.mark.parametrize(
    ("greedy", "pass_k", "expected"),
    [(0.51, 0.71, True), (0.70, 0.96, False), (0.12, 0.28, False), (0.40, 0.50, False), (0.20, 0.40, True)],
)
def test_the_band(greedy: float, pass_k: float, expected: bool) -> None:
    """Lenient greedy within 15-60% and pass@8 at least 0.15 above it (the screen's add2_d1/d2/d3 among them)."""
    assert in_band(_metrics(greedy, pass_k), 8) is expected


def test_a_common_answer_keeps_a_task_out_of_the_band() -> None:
    """letter_counting: 16% lenient, but answering its most common count scores 38%."""
    assert not in_band(_metrics(0.16, 0.51, majority=0.38), 8)


@pytest.mark.parametrize("name", list(CANDIDATES))
def test_every_candidate_is_a_recipe_relay_accepts(name: str) -> None:
    from omegaconf import OmegaConf

    recipe = {"datasets": CANDIDATES[name]}
    sizes = {"train_size": 10, "test_size": 10}
    generate = OmegaConf.create({"seed": 1, "test_seed": 7_000_000, **sizes, "options": recipe})
    assert check_options(generate) == []


def test_screening_one_candidate_on_the_tiny_model(tiny_model_dir: Path, environ_restored) -> None:
    """The whole script with ``--no-write`` (a process of its own, as a user runs it: vLLM in-process): one engine,
    one grader, the table row with both accuracies."""
    argv = ["--model", str(tiny_model_dir), "--candidates", "add2_d1", "--problems", "4", "--k", "2"]
    argv += ["--max-new-tokens", "8", "--no-write"]
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.learning.screen_tasks", *argv],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "| `add2_d1` |" in result.stdout and "lenient greedy [95% CI]" in result.stdout
    assert f"--candidates add2_d1 --model {tiny_model_dir} --problems 4 --k 2 --max-new-tokens 8" in result.stdout


def test_row_and_command_golden() -> None:
    import argparse

    metrics = {
        "val/accuracy_greedy": 0.18,
        "val/accuracy_greedy_ci_low": 0.12,
        "val/accuracy_greedy_ci_high": 0.27,
        "val/lenient_accuracy_greedy": 0.51,
        "val/lenient_accuracy_greedy_ci_low": 0.41,
        "val/lenient_accuracy_greedy_ci_high": 0.61,
        "val/mean@8": 0.08,
        "val/lenient_mean@8": 0.34,
        "val/pass@8": 0.37,
        "val/lenient_pass@8": 0.71,
        "val/majority_baseline": 0.07,
        "val/format_rate_greedy": 0.35,
    }
    row = row_line("add2_d2", {"metrics": metrics, "seconds": 125.2, "in_band": True}, 8)
    cells = ["`add2_d2`", "0.18 [0.12, 0.27]", "0.51 [0.41, 0.61]", "0.08 / 0.34", "0.37 / 0.71", "0.07", "0.35"]
    assert row == "| " + " | ".join([*cells, "125", "**yes**"]) + " |"
    args = argparse.Namespace(
        candidates=DEFAULT_CANDIDATES, model="smollm2-135m", problems=100, k=8, max_new_tokens=64, temperature=0.7
    )
    assert command_line(args) == "python -m benchmarks.learning.screen_tasks"
