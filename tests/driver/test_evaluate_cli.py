"""``python -m driver.evaluate``: which directory it evaluates, the JSON line it prints, exit 2 on bad paths."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from driver.evaluate import EvaluateError, resolve_checkpoint
from relay.repo import REPO_ROOT


def _hf(directory: Path) -> Path:
    directory.mkdir(parents=True)
    (directory / "config.json").write_text("{}")
    return directory


def _run(tmp_path: Path, steps: list[int], export: bool = True) -> Path:
    run = tmp_path / "outputs" / "run"
    for step in steps:
        ckpt = run / "checkpoints" / f"step_{step:06d}"
        ckpt.mkdir(parents=True)
        (ckpt / "driver.json").write_text("{}")
        if export:
            _hf(ckpt / "hf")
    (run / "checkpoints" / ".tmp-step_000009-1").mkdir()  # a half-written one is never picked
    (run / "config.yaml").write_text("config_version: 1\n")
    return run


def test_resolves_model_checkpoint_and_run_directories(tmp_path: Path) -> None:
    model = _hf(tmp_path / "model")
    assert resolve_checkpoint(str(model)) == (model, None)
    run = _run(tmp_path, [2, 4])
    newest = run / "checkpoints" / "step_000004"
    assert resolve_checkpoint(str(run)) == (newest / "hf", run / "config.yaml")
    older = run / "checkpoints" / "step_000002"
    assert resolve_checkpoint(str(older)) == (older / "hf", run / "config.yaml")
    assert resolve_checkpoint(str(older / "hf")) == (older / "hf", run / "config.yaml")


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        ("missing", r"no such file or directory; expected an HF model directory \(with config.json\)"),
        ("empty_dir", r"no config.json and no checkpoints/ there; expected an HF model directory"),
        ("file", r"not a directory"),
        ("no_checkpoint", r"the run has no complete checkpoint yet \(looked in .*checkpoints\)"),
        ("no_export", r"checkpoint .*step_000004 has no HF export .*trainer.export_hf=false"),
    ],
)
def test_bad_paths_say_what_was_expected(tmp_path: Path, layout: str, message: str) -> None:
    target = tmp_path / "target"
    if layout == "empty_dir":
        target.mkdir()
    elif layout == "file":
        target.write_text("x")
    elif layout == "no_checkpoint":
        (target / "checkpoints").mkdir(parents=True)
    elif layout == "no_export":
        target = _run(tmp_path, [4], export=False)
    with pytest.raises(EvaluateError, match=message) as info:
        resolve_checkpoint(str(target))
    assert str(target) in str(info.value)


def _evaluate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "driver.evaluate", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600
    )


def test_cli_prints_the_val_metrics(tiny_model_dir: Path, tmp_path: Path) -> None:
    out, responses = tmp_path / "eval" / "metrics.json", tmp_path / "eval" / "responses.jsonl"
    result = _evaluate(
        "--checkpoint", str(tiny_model_dir), "--config", "configs/gsm8k_smollm2_learn.yaml", "--engine", "hf",
        "--samples", "3", "--k", "2", "--max-new-tokens", "32", "--set", "rollout.temperature=0.7",
        "--out", str(out), "--responses", str(responses),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    (line,) = result.stdout.strip().splitlines()  # logs go to stderr: stdout is the JSON line alone
    metrics = json.loads(line)
    for key in ("val/accuracy_greedy", "val/pass@2", "val/mean@2", "val/problems", "val/seconds", "val/new_tokens"):
        assert key in metrics, key
    assert metrics["val/problems"] == 3.0 and 0.0 <= metrics["val/pass@2"] <= 1.0
    assert 0 < metrics["val/new_tokens"] <= 3 * 3 * 32
    assert json.loads(out.read_text()) == metrics
    records = [json.loads(line) for line in responses.read_text().splitlines()]
    assert [r["sample"] for r in records] == [0, 1, 2] * 3 and all(r["question"] and r["ground_truth"] for r in records)
    greedy = [r for r in records if r["sample"] == 0]
    assert sum(r["correct"] for r in greedy) / 3 == metrics["val/accuracy_greedy"]
    assert "evaluating" in result.stderr and "(hf)" in result.stderr
    terminal = result.stderr.splitlines()  # Relay's own lines; the libraries' are in the log the first one names
    assert len(terminal) == 2 and terminal[0].startswith("logs: "), terminal
    assert Path(terminal[0].split()[1]).is_file()


def test_help_goes_to_stdout() -> None:
    """``--help | less`` and ``| grep`` read stdout; only a run's library output is moved to stderr."""
    done = _evaluate("--help")
    assert done.returncode == 0 and "usage:" in done.stdout and "--checkpoint" in done.stdout, done.stderr


def test_cli_bad_path_exits_2_without_a_traceback(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    result = _evaluate("--checkpoint", str(missing), "--engine", "hf")
    assert result.returncode == 2
    assert f"error: --checkpoint {missing}: no such file or directory" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_cli_bad_config_exits_2(tiny_model_dir: Path) -> None:
    result = _evaluate("--checkpoint", str(tiny_model_dir), "--k", "-1")
    assert result.returncode == 2 and "trainer.val_k" in result.stderr and "Traceback" not in result.stderr
