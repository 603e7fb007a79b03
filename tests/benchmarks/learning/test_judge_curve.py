"""The judge-only run's report: one row per step, the judge's score beside the samples' exact accuracy, the held-out
readings with their intervals where the step validated, and the base row first."""

from __future__ import annotations

import doctest
import json

import pytest

from benchmarks.learning import judge_curve


def test_the_docstring_examples_hold() -> None:
    assert doctest.testmod(judge_curve).failed == 0


def _validation(strict: float, lenient: float) -> dict:
    return {
        "val/accuracy_greedy": strict,
        "val/accuracy_greedy_ci_low": strict / 2,
        "val/accuracy_greedy_ci_high": strict * 2,
        "val/lenient_accuracy_greedy": lenient,
    }


def test_a_run_reads_back_as_its_steps_beside_the_judges_score(tmp_path, capsys) -> None:
    run = tmp_path / "run"
    run.mkdir()
    rows = [
        {"step": 0, "time/elapsed_s": 30.0, "reward_model/score_mean": 0.25, "reward/accuracy": 0.0},
        {"step": 1, "time/elapsed_s": 90.0, "reward_model/score_mean": 0.75, "reward/accuracy": 0.5,
         **_validation(0.125, 0.5)},
        {"step": 2, "time/elapsed_s": 150.0, "reward_model/score_mean": 0.5, "reward/accuracy": 0.25,
         **_validation(0.25, 0.5)},
    ]  # fmt: skip
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = tmp_path / "base.json"
    base.write_text(json.dumps(_validation(0.0625, 0.375)))
    assert judge_curve.main(["--run", str(run), "--base", str(base), "--no-write"]) == 0
    table = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| ")]
    assert table[1:] == [
        "| base | - | - | - | - | 0.062 [0.031, 0.125] | 0.375 |",
        "| step 0 | 0.5 | 0.250 | 0.000 | - | - | - |",
        "| step 1 | 1.5 | 0.750 | 0.500 | - | 0.125 [0.062, 0.250] | 0.500 |",
        "| step 2 | 2.5 | 0.500 | 0.250 | - | 0.250 [0.125, 0.500] | 0.500 |",
    ]


def test_a_missing_run_is_named_with_what_to_do_first(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as refused:
        judge_curve.main(["--run", str(tmp_path / "nope"), "--base", str(tmp_path / "b.json"), "--no-write"])
    assert refused.value.code == 2
    assert "train the run and evaluate the base first" in capsys.readouterr().err
