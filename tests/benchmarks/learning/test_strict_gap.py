"""The strict-gap benchmark: its bands and intervals by hand, and its whole path on the tiny model."""

from __future__ import annotations

import pytest

from benchmarks.learning.strict_gap import main, split_accuracy


def test_split_accuracy_by_band() -> None:
    questions = ["Calculate 3 + 4.", "Calculate 30 + 4.", "Calculate 31 + 40.", "Calculate 1 + 1."]
    figures = split_accuracy(questions, [1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0])
    assert figures["all"]["strict"] == 0.5 and figures["all"]["lenient"] == 1.0
    assert figures["bands"]["both terms < 10"]["problems"] == 2 and figures["bands"]["a term 10-99"]["strict"] == 0.5
    low, high = figures["all"]["strict_ci"]
    assert low < 0.5 < high


def test_the_benchmark_runs_on_the_tiny_model(tiny_model_dir, capsys, environ_restored) -> None:
    overrides = ["rollout.engine=hf", "data.max_response_length=8", "reward.overlong_buffer.length=4"]
    argv = ["--model", str(tiny_model_dir), "--screen-problems", "3", "--held-out-problems", "3", "--no-write"]
    assert main(argv + [x for o in overrides for x in ("--set", o)]) == 0
    table = capsys.readouterr().out
    assert "| screening | all | 3 |" in table and "| held-out | all | 3 |" in table


@pytest.mark.parametrize("question", ["Calculate 100 + 0."])
def test_a_hundred_is_its_own_band(question: str) -> None:
    assert list(split_accuracy([question], [0.0], [0.0])["bands"]) == ["a term of 100"]
