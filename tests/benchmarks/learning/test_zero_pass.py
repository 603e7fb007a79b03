"""benchmarks.learning.zero_pass's arms and report from evaluations and metrics made here: each arm's settings, what
its retries did in training, its final answers by band, and each remedy against GRPO alone problem by problem (the
runs are the benchmark)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks.learning.relay_vs_trl import responses_file
from benchmarks.learning.zero_pass import arm_overrides, command_options, parse_args, report, retry_summary
from relay.config import load_config
from relay.repo import REPO_ROOT

QUESTIONS = ["Calculate 3 + 4.", "Calculate 23 + 45.", "Calculate 47 + 38.", "Calculate 8 + 47.", "Calculate 58 + 6."]
PRESET = REPO_ROOT / "configs" / "arithmetic_smollm2.yaml"


def _evaluation(out: Path, name: str, solved: list[bool]) -> str:
    records = [
        {"uid": f"p{i}", "sample": 0, "question": q, "correct": ok, "correct_lenient": ok}
        for i, (q, ok) in enumerate(zip(QUESTIONS, solved, strict=True))
    ]
    responses_file(out, name).write_text("".join(json.dumps(r) + "\n" for r in records))
    return name


def test_each_arm_is_a_valid_setting_of_the_preset() -> None:
    """The arms' overrides load on the preset: the retry on, at the rollout's temperature or the one given."""
    for arm, temperature in (("retry", None), ("retry_hot", 1.0)):
        cfg = load_config(PRESET, list(arm_overrides(arm, 1.0)), environ={}).cfg
        assert cfg.algorithm.filter_groups.retry_unsolved.enable is True
        assert cfg.algorithm.filter_groups.retry_unsolved.temperature == temperature
    assert arm_overrides("grpo", 1.0) == ()
    revisit = load_config(PRESET, list(arm_overrides("revisit", 1.0)), environ={}).cfg
    assert revisit.data.revisit_unsolved.enable is True and not revisit.algorithm.filter_groups.retry_unsolved.enable
    assert not revisit.data.revisit_unsolved.newest_first and revisit.data.revisit_unsolved.capacity == 0
    recent = load_config(PRESET, list(arm_overrides("revisit_recent", 1.0)), environ={}).cfg.data.revisit_unsolved
    assert recent.enable is True and recent.newest_first is True and recent.capacity == 16
    with pytest.raises(SystemExit, match="unknown arm 'hot'; the arms are grpo, retry, retry_hot, revisit, revisit_"):
        arm_overrides("hot", 1.0)


def test_a_run_publishes_under_its_splits_name_unless_named() -> None:
    """A second experiment on the same split gets its own results JSON, figure and BENCHMARKS.md marks."""
    assert parse_args([]).name == "zero_pass" and parse_args(["--split", "test"]).name == "zero_pass_test"
    named = parse_args(["--arms", "grpo,revisit_recent", "--name", "zero_pass_recent"])
    assert named.name == "zero_pass_recent" and command_options(named)[-2:] == ["--name", "zero_pass_recent"]
    assert "--name" not in command_options(parse_args([]))


def test_arms_are_read_against_grpo_which_must_come_first() -> None:
    assert parse_args(["--arms", "grpo,retry_hot"]).arms == ["grpo", "retry_hot"]
    with pytest.raises(SystemExit):
        parse_args(["--arms", "retry,grpo"])
    with pytest.raises(SystemExit, match="unknown arm"):
        parse_args(["--arms", "grpo,hotter"])


def test_the_training_summary_averages_the_filters_metrics_per_step(tmp_path: Path) -> None:
    rows = [
        {"step": 0, "filter/retried_prompts": 3.0, "filter/retries_solved": 1.0, "filter/groups_kept": 8.0},
        {"step": 1, "filter/retried_prompts": 1.0, "filter/retries_solved": 0.0, "filter/groups_kept": 6.0,
         "data/revisited": 4.0, "data/revisits_solved": 1.0},
    ]  # fmt: skip
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = retry_summary(tmp_path)
    assert summary["steps"] == 2.0 and summary["retried_per_step"] == 2.0
    assert summary["retries_solved_per_step"] == 0.5 and summary["groups_kept_per_step"] == 7.0
    assert summary["revisited_per_step"] == 2.0 and summary["revisits_solved_per_step"] == 0.5
    assert summary["extra_passes_per_step"] == 0.0  # a metric the rows lack counts as 0


def test_the_report_gives_the_training_the_bands_and_each_remedy_against_grpo(tmp_path: Path) -> None:
    t, f = True, False
    solved = {
        "eval_base": [f, t, f, f, f],
        "eval_grpo_step16": [t, t, f, f, f],
        "eval_retry_hot_step16": [t, t, t, f, t],
    }
    names = [_evaluation(tmp_path, name, answers) for name, answers in solved.items()]
    finals = dict(zip(("base", "grpo", "retry_hot"), names, strict=True))
    training = {
        "grpo": {"steps": 20.0, "retried_per_step": 0.0, "retries_solved_per_step": 0.0, "revisited_per_step": 0.0,
                 "revisits_solved_per_step": 0.0, "groups_kept_per_step": 7.5, "extra_passes_per_step": 1.2},
        "retry_hot": {"steps": 18.0, "retried_per_step": 2.5, "retries_solved_per_step": 0.75,
                      "revisited_per_step": 0.0, "revisits_solved_per_step": 0.0, "groups_kept_per_step": 7.8,
                      "extra_passes_per_step": 1.5},
    }  # fmt: skip
    args = argparse.Namespace(
        config=PRESET, minutes=15.0, problems=5, out=tmp_path, split="dev", arms=["grpo", "retry_hot"],
        retry_temperature=1.0, name="zero_pass",
    )  # fmt: skip
    section = report(args, {"finals": finals, "training": training}, "EPYC, AVX2", "docs/z.png")
    assert (
        "`python -m benchmarks.learning.zero_pass --config configs/arithmetic_smollm2.yaml --split dev --minutes 15 "
        "--arms grpo,retry_hot --retry-temperature 1`" in section
    )
    assert "(5 problems of the dev split, test_seed 2000001; greedy; EPYC, AVX2;" in section
    assert "| retry_hot | 18 | 2.50 | 0.75 | 0.00 | 0.00 | 7.80 | 1.50 |" in section
    assert "| retry_hot | 0.800 [0.38, 0.96] (n=5) |" in section
    # strict: grpo 2 of 5, retry_hot 4 of 5; the two only B solved are the carried sums
    assert "`retry_hot` (B) against `grpo` (A) at their final checkpoints (strict):" in section
    assert "| all | 5 | 0.400 | 0.800 | +0.400 [" in section and "| 0 / 2 | 0.5 |" in section
    assert section.endswith("![dev-split accuracy against minutes](docs/z.png)")
