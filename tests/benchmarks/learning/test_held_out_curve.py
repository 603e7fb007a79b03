"""benchmarks.learning.held_out_curve: a run's validations (and the base's evaluation) as a table and a plot on
wall-clock minutes."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.learning.held_out_curve import main, points, table


def _validation(strict: float, lenient: float) -> dict[str, float]:
    return {
        "val/accuracy_greedy": strict,
        "val/accuracy_greedy_ci_low": strict - 0.05,
        "val/accuracy_greedy_ci_high": strict + 0.05,
        "val/lenient_accuracy_greedy": lenient,
        "val/lenient_accuracy_greedy_ci_low": lenient - 0.05,
        "val/lenient_accuracy_greedy_ci_high": lenient + 0.05,
        "val/format_rate_greedy": 0.5,
        "val/problems": 200.0,
    }


def _run(tmp_path: Path) -> Path:
    rows = [
        {"step": 0, "time/elapsed_s": 30.0},
        {"step": 1, "time/elapsed_s": 60.0, **_validation(0.40, 0.60)},
        {"step": 2, "time/elapsed_s": 90.0},
        {"step": 3, "time/elapsed_s": 150.0, **_validation(0.80, 0.85)},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def test_the_base_first_then_each_validation_on_the_runs_clock(tmp_path: Path) -> None:
    evaluations = points(_run(tmp_path), _validation(0.10, 0.50), None)
    assert [(e["minutes"], e["step"]) for e in evaluations] == [(0.0, 0), (1.0, 2), (2.5, 4)]
    lines = table(evaluations).splitlines()
    assert lines[2] == "| 0.0 | 0 | 0.100 [0.050, 0.150] | 0.500 [0.450, 0.550] | 0.50 | 200 |"
    assert lines[4] == "| 2.5 | 4 | 0.800 [0.750, 0.850] | 0.850 [0.800, 0.900] | 0.50 | 200 |"


def test_the_script_writes_the_plot(tmp_path: Path, capsys) -> None:
    base = tmp_path / "base.json"
    base.write_text(json.dumps(_validation(0.1, 0.5)))
    png = tmp_path / "curve.png"
    assert main([str(_run(tmp_path)), "--base", str(base), "--png", str(png)]) == 0
    assert png.stat().st_size > 0 and "| 1.0 | 2 |" in capsys.readouterr().out


def test_a_run_without_validations_is_an_error(tmp_path: Path, capsys) -> None:
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 0, "time/elapsed_s": 1.0}) + "\n")
    assert main([str(tmp_path)]) == 2
    assert "has no validation rows" in capsys.readouterr().err
