"""benchmarks.learning.paired: the exact McNemar test and the paired bootstrap (golden values), and the report on two
response files of the same problems."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.learning.paired import compare, main, mcnemar_exact, paired_bootstrap, paired_outcomes


@pytest.mark.parametrize(
    ("only_a", "only_b", "p"),
    [(0, 0, 1.0), (1, 9, 0.021484375), (9, 1, 0.021484375), (0, 5, 0.0625), (3, 3, 1.0), (2, 8, 0.109375)],
)
def test_mcnemar_golden(only_a: int, only_b: int, p: float) -> None:
    assert mcnemar_exact(only_a, only_b) == pytest.approx(p, rel=1e-12)


def test_mcnemar_agrees_with_scipys_two_sided_binomial_test() -> None:
    stats = pytest.importorskip("scipy.stats")
    for only_a, only_b in [(4, 15), (10, 12), (0, 7), (30, 50)]:
        expected = stats.binomtest(only_a, only_a + only_b, 0.5).pvalue
        assert mcnemar_exact(only_a, only_b) == pytest.approx(expected, rel=1e-9)


def test_paired_bootstrap_is_tighter_than_the_spread_of_each_arm_when_they_agree_mostly() -> None:
    """200 problems, B solves the 100 A solves plus 10 more: the difference is 0.05 and its paired interval stays
    above 0, where the two arms' own 95% intervals (about +-0.07 each) overlap."""
    a = [i < 100 for i in range(200)]
    b = [i < 110 for i in range(200)]
    difference, low, high = paired_bootstrap(a, b, seed=1)
    assert difference == pytest.approx(0.05)
    assert 0.0 < low < 0.05 < high < 0.1


def test_compare_counts_the_discordant_problems() -> None:
    c = compare([True, True, False, False, True], [True, False, True, True, True])
    assert (c.only_a, c.only_b, c.accuracy_a, c.accuracy_b) == (1, 2, 0.6, 0.8)
    assert c.p_value == 1.0


def test_evaluations_of_different_problems_are_refused() -> None:
    with pytest.raises(ValueError, match="1 only in A, 0 only in B"):
        paired_outcomes({"p1": ("q", True), "p2": ("r", False)}, {"p1": ("q", True)})


def _records(path: Path, correct: list[bool]) -> Path:
    lines = []
    for i, ok in enumerate(correct):
        question = ["Calculate 3 + 4.", "Calculate 47 + 8.", "Calculate 23 + 45."][i % 3]
        lines.append({"uid": f"p{i}", "sample": 0, "question": question, "correct": ok, "correct_lenient": True})
        lines.append({"uid": f"p{i}", "sample": 1, "question": question, "correct": not ok, "correct_lenient": ok})
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


def test_the_report_reads_the_greedy_responses_of_two_files_and_splits_by_band(tmp_path, capsys) -> None:
    a = _records(tmp_path / "a.jsonl", [True, False, False, True, False, False])
    b = _records(tmp_path / "b.jsonl", [True, True, False, True, True, False])
    assert main([str(a), str(b), "--bands"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2].startswith("| all | 6 | 0.333 | 0.667 | +0.333")
    assert "| 0 / 2 | 0.5 |" in out[2]
    assert [line.split(" | ")[0] for line in out[3:]] == [
        "| one-digit",
        "| two-digit, no carry",
        "| mixed length, carry",
    ]
    assert main([str(a), str(b), "--reading", "lenient"]) == 0
    assert capsys.readouterr().out.splitlines()[2].startswith("| all | 6 | 1.000 | 1.000 | +0.000")
    assert main([str(a), str(tmp_path / "missing.jsonl")]) == 2
