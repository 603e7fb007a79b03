"""The judge-agreement benchmark: its statistics against hand-counted golden values, and its whole path (policy
samples, exact grades, the judge's P(yes), the table) on the tiny model."""

from __future__ import annotations

import math

import pytest

from benchmarks.learning.judge_agreement import agreement, main


def test_agreement_counts_and_auc_by_hand() -> None:
    a = agreement([0.9, 0.4, 0.4, 0.8, 0.1], [1, 1, 0, 0, 0])
    assert (a["true_yes"], a["false_yes"], a["false_no"], a["true_no"]) == (1, 1, 1, 2)
    assert a["agreement"] == pytest.approx(3 / 5)
    # right {0.9, 0.4} vs wrong {0.4, 0.8, 0.1}: 0.9 beats 3; 0.4 ties 0.4 (half), loses to 0.8, beats 0.1 -> 4.5 / 6
    assert a["auc"] == pytest.approx(4.5 / 6)
    assert a["p_yes_right"] == pytest.approx(0.65) and a["p_yes_wrong"] == pytest.approx(1.3 / 3)
    assert math.isnan(agreement([0.5], [1])["auc"])  # no wrong response: no AUC


def test_the_benchmark_runs_on_the_tiny_model(tiny_model_dir, capsys, environ_restored) -> None:
    tiny = str(tiny_model_dir)
    args = ["--model", tiny, "--judge", tiny, "--problems", "3", "--samples", "2", "--no-write"]
    overrides = ["rollout.engine=hf", "data.max_response_length=8", "reward.overlong_buffer.length=4"]
    assert main(args + [x for o in overrides for x in ("--set", o)]) == 0
    table = capsys.readouterr().out
    assert "6 responses (3 held-out problems x 2 samples" in table and "| strict |" in table and "| lenient |" in table
