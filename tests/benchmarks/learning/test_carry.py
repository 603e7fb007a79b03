"""benchmarks.learning.carry's report from evaluations made here: each arm's final answers by band with intervals,
the base's first, and the warm-started arm against GRPO alone problem by problem (the runs are the benchmark)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks.learning.carry import (
    DEFAULT_TRACES,
    SFT_PRESET,
    band_cells,
    command_options,
    grpo_budgets,
    marks,
    report,
    result_name,
    same_phases,
    sft_settings,
    split_seed,
)
from benchmarks.learning.relay_vs_trl import responses_file
from relay.config import load_config
from relay.repo import REPO_ROOT

QUESTIONS = ["Calculate 3 + 4.", "Calculate 23 + 45.", "Calculate 47 + 38.", "Calculate 8 + 47.", "Calculate 58 + 6."]


def _evaluation(out: Path, name: str, solved: list[bool]) -> str:
    records = [
        {"uid": f"p{i}", "sample": 0, "question": q, "correct": ok, "correct_lenient": ok or i == 0}
        for i, (q, ok) in enumerate(zip(QUESTIONS, solved, strict=True))
    ]
    responses_file(out, name).write_text("".join(json.dumps(r) + "\n" for r in records))
    return name


def test_the_report_gives_each_arms_bands_and_the_paired_difference(tmp_path: Path) -> None:
    t, f = True, False
    finals = {
        "base": _evaluation(tmp_path, "eval_base", [f, t, f, f, f]),
        "grpo": _evaluation(tmp_path, "eval_grpo_step16", [t, t, f, f, f]),
        "sft": _evaluation(tmp_path, "eval_sft", [t, t, t, f, t]),
        "sft_grpo": _evaluation(tmp_path, "eval_sft_grpo_step16", [t, t, t, t, t]),
    }
    args = _args(tmp_path, problems=5)
    results = {"sft": {"steps": 100.0, "minutes": 9.5}, "budgets": {"grpo": 15.0, "sft_grpo": 15.0}, "finals": finals}
    section = report(args, results, "Xeon, AVX-512", "docs/c.png")
    assert (
        "`python -m benchmarks.learning.carry --config configs/arithmetic_smollm2.yaml --split dev --minutes 15`"
        in section
    )
    assert "(5 problems of the dev split, test_seed 2000001; greedy; Xeon, AVX-512;" in section
    assert (
        "The warm start: 100 steps in 9.5 min; `sft_grpo` counts them before its own 15, `grpo` trains 15." in section
    )
    assert "| arm | all | one-digit | two-digit, no carry | two-digit, carry | mixed length, carry |" in section
    # the base solves only the two-digit sum without a carry; sft_grpo every problem
    assert "| base | 0.200 [0.04, 0.62] (n=5) | 0.000 [0.00, 0.79] (n=1) | 1.000 [0.21, 1.00] (n=1) |" in section
    assert "| sft_grpo | 1.000 [0.57, 1.00] (n=5) |" in section
    # strict: grpo 2 of 5, sft_grpo 5 of 5; the three only B solved
    assert "| all | 5 | 0.400 | 1.000 | +0.600 [" in section and "| 0 / 3 | 0.25 |" in section
    assert "| mixed length, carry | 2 | 0.000 | 1.000 | +1.000 [+1.000, +1.000] | 0 / 2 | 0.5 |" in section
    assert section.endswith("![dev-split accuracy against total minutes](docs/c.png)")


def _args(out: Path, **given: object) -> argparse.Namespace:
    options = {"config": REPO_ROOT / "configs" / "arithmetic_smollm2.yaml", "minutes": 15.0, "problems": 200}
    options |= {"out": out, "split": "dev", "sft_steps": 0, "sft_save_every": 0, "total_minutes": 0.0}
    options |= {"sft_traces": DEFAULT_TRACES}
    return argparse.Namespace(**(options | given))


def test_one_wall_clock_takes_the_warm_starts_minutes_from_the_warm_started_arm(tmp_path: Path) -> None:
    assert grpo_budgets(_args(tmp_path), 9.5) == {"grpo": 15.0, "sft_grpo": 15.0}
    assert grpo_budgets(_args(tmp_path, total_minutes=15.0), 9.5) == {"grpo": 15.0, "sft_grpo": 5.5}
    with pytest.raises(SystemExit, match="the warm start alone took 16.0 min; give fewer --sft-steps"):
        grpo_budgets(_args(tmp_path, total_minutes=15.0), 16.0)


def test_a_shorter_warm_start_reads_fewer_rows_and_the_test_split_is_the_presets(tmp_path: Path) -> None:
    settings = sft_settings(_args(tmp_path, sft_steps=40, sft_save_every=10, split="test"))
    assert "trainer.total_training_steps=40" in settings and "sft.train_size=640" in settings
    assert "trainer.save_freq=10" in settings and not any("test_seed" in s for s in settings)
    assert "data.generate.test_seed=2000001" in sft_settings(_args(tmp_path))
    assert (split_seed(_args(tmp_path)), split_seed(_args(tmp_path, split="test"))) == (2000001, 3000001)
    shown = command_options(_args(tmp_path, split="test", total_minutes=15.0, sft_steps=40))
    assert shown == ["--config", "configs/arithmetic_smollm2.yaml", "--split", "test", "--total-minutes", "15"] + [
        "--sft-steps",
        "40",
    ]
    placed = _args(tmp_path, sft_steps=20, sft_traces="worked_sums_placed")
    assert "sft.traces=worked_sums_placed" in sft_settings(placed)
    assert command_options(placed)[-2:] == ["--sft-traces", "worked_sums_placed"]
    assert not any("sft.traces" in s for s in settings)


def test_cached_phases_of_other_settings_are_refused(tmp_path: Path) -> None:
    same_phases(_args(tmp_path))
    same_phases(_args(tmp_path))  # the same settings again: the phases are reused
    with pytest.raises(SystemExit, match="holds phases made with .*'split': 'dev'.* give --fresh or another --out"):
        same_phases(_args(tmp_path, split="test"))
    with pytest.raises(SystemExit, match="'sft_traces': 'worked_sums_placed'"):
        same_phases(_args(tmp_path, sft_traces="worked_sums_placed"))


def test_a_band_cell_reads_the_lenient_grade_when_asked(tmp_path: Path) -> None:
    _evaluation(tmp_path, "e", [False] * 5)
    assert band_cells(responses_file(tmp_path, "e"), "strict")["one-digit"] == "0.000 [0.00, 0.79] (n=1)"
    assert band_cells(responses_file(tmp_path, "e"), "lenient")["one-digit"] == "1.000 [0.21, 1.00] (n=1)"


def test_the_warm_start_preset_reads_the_arithmetic_rows_and_leaves_room_for_worked_answers() -> None:
    cfg = load_config(SFT_PRESET, [], environ={}).cfg
    assert (cfg.sft.enable, cfg.sft.traces, cfg.data.task, cfg.rollout.n) == (True, "worked_sums", "reasoning_gym", 1)
    assert cfg.data.max_response_length == 128 and cfg.data.generate.seed == 1


def test_a_shorter_warm_start_keeps_the_records_of_the_others() -> None:
    assert [result_name("dev"), result_name("test")] == ["carry", "carry_test"]
    assert [result_name("dev", 30), result_name("test", 30)] == ["carry_sft30", "carry_test_sft30"]
    assert marks("test", 30) == ("<!-- carry_test_sft30:begin -->", "<!-- carry_test_sft30:end -->")
