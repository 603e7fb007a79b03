"""The terminal's header and a dead role's memory lines say what their docstrings show."""

from __future__ import annotations

import doctest

from driver import console
from driver.console import TABLE_COLUMNS, memory_lines, table_header, table_row


def test_docstring_examples() -> None:
    result = doctest.testmod(console)
    assert result.attempted >= 3 and result.failed == 0


def test_an_oom_kill_says_what_to_change() -> None:
    lines = memory_lines("learner", True, {"step": 0, "memory/learner_peak_rss_gib": 11.6}, 23.5)
    assert lines[0] == "learner peak memory 11.6 GiB at step 0 of this node's 23.5 GiB"
    assert lines[1].startswith("what to change:") and "one job per node" in lines[1]
    assert len(memory_lines("learner", False, {}, 23.5)) == 1  # a crash: no memory advice


def test_the_step_table_lines_up_under_its_header() -> None:
    header = table_header()
    assert header.split() == [name for name, _, _ in TABLE_COLUMNS]
    row = table_row({"step": 3, "reward/mean": 0.031, "timing/step": 47.04, "memory/roles_peak_rss_gib": 5.6})
    assert len(row) == len(header)
    assert row.split()[:3] == ["3", "0.031", "-"]  # a metric the step lacks shows "-"
    assert row.split()[-4:] == ["47.0", "-", "-", "5.6"]
