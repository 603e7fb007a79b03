"""The trace-form comparison's report, options and per-form phase folders, on hand-made evaluations."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks.learning.carry import sft_settings
from benchmarks.learning.relay_vs_trl import responses_file
from benchmarks.learning.trace_forms import form_args, parse_args, parse_forms, report

QUESTIONS = ["Calculate 3 + 4.", "Calculate 23 + 45.", "Calculate 47 + 38.", "Calculate 8 + 47.", "Calculate 58 + 6."]


def _evaluation(out: Path, name: str, solved: list[bool]) -> None:
    records = [
        {"uid": f"p{i}", "sample": 0, "question": q, "correct": ok, "correct_lenient": ok}
        for i, (q, ok) in enumerate(zip(QUESTIONS, solved, strict=True))
    ]
    responses_file(out, name).write_text("".join(json.dumps(r) + "\n" for r in records))


def test_the_report_pairs_each_later_form_against_the_first_by_band(tmp_path: Path) -> None:
    t, f = True, False
    _evaluation(tmp_path, "eval_base", [f, t, f, f, f])
    _evaluation(tmp_path, "eval_worked_sums", [t, t, t, f, f])
    _evaluation(tmp_path, "eval_worked_sums_placed", [t, t, t, t, t])
    args = parse_args(["--out", str(tmp_path), "--problems", "5"])
    runs = {"worked_sums": {"steps": 20.0, "minutes": 4.6}, "worked_sums_placed": {"steps": 20.0, "minutes": 5.1}}
    section = report(args, runs, "Xeon, AVX-512")
    command = "`python -m benchmarks.learning.trace_forms --config configs/arithmetic_smollm2.yaml --sft-steps 20"
    assert command in section
    assert "--forms worked_sums,worked_sums_placed`" in section
    assert "(5 problems of the dev split, test_seed 2000001; greedy; Xeon, AVX-512;" in section
    assert "`worked_sums` 20 steps in 4.6 min; `worked_sums_placed` 20 steps in 5.1 min." in section
    assert "| worked_sums | 0.600 [0.23, 0.88] (n=5) |" in section
    assert "| worked_sums_placed | 1.000 [0.57, 1.00] (n=5) |" in section
    # the two mixed-length sums only the placed form solved; none only the plain form solved
    assert "`worked_sums_placed` (B) against `worked_sums` (A) (strict):" in section
    assert "| all | 5 | 0.600 | 1.000 | +0.400 [" in section and "| 0 / 2 | 0.5 |" in section


def test_each_form_warms_up_in_its_own_folder_on_the_same_rows(tmp_path: Path) -> None:
    args = parse_args(["--out", str(tmp_path), "--sft-steps", "20"])
    plain, placed = (sft_settings(form_args(args, form)) for form in ("worked_sums", "worked_sums_placed"))
    assert f"trainer.output_dir={tmp_path / 'worked_sums_placed'}" in placed
    assert "sft.traces=worked_sums_placed" in placed and not any("sft.traces" in s for s in plain)
    for settings in (plain, placed):
        assert "sft.train_size=320" in settings and "data.generate.test_seed=2000001" in settings


@pytest.mark.parametrize("text", ["worked_sums", "worked_sums,worked_sums", "worked_sums,gsm8k_plain"])
def test_fewer_than_two_known_forms_are_refused_naming_the_choices(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=f"--forms {text}: give two or more distinct forms of"):
        parse_forms(text)


def test_a_warm_start_of_no_steps_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--out", str(tmp_path), "--sft-steps", "0"])
