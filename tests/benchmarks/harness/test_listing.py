"""benchmarks.harness.listing: what ``python -m benchmarks.<group>`` prints, read from the modules' source."""

from __future__ import annotations

import doctest
import importlib.util
from pathlib import Path

import pytest

from benchmarks.harness import listing
from benchmarks.harness.listing import Benchmark, benchmarks_of, first_sentence
from relay.repo import REPO_ROOT

GROUPS = ("benchmarks.speed", "benchmarks.learning", "benchmarks.faults", "benchmarks.gpu")


def test_the_docstring_examples_hold() -> None:
    assert doctest.testmod(listing).failed == 0


def test_a_group_lists_its_scripts_with_their_question_and_command(tmp_path: Path) -> None:
    group = tmp_path / "bench" / "group"
    group.mkdir(parents=True)
    (group / "__init__.py").write_text('"""Is it fast? The group\'s question."""\n')
    (group / "__main__.py").write_text('"""The listing."""\n')
    (group / "step.py").write_text(
        '"""How long a step takes: the\nmedian. Usage below."""\n\nif __name__ == "__main__":\n    pass\n'
    )
    (group / "helper.py").write_text('"""Shared parts, not a benchmark."""\n')
    assert benchmarks_of("bench.group", tmp_path) == [
        Benchmark("bench.group.step", "How long a step takes: the median.")
    ]
    assert listing.listing("bench.group", tmp_path) == [
        "bench.group: Is it fast?",
        "  python -m bench.group.step  How long a step takes: the median.",
    ]


@pytest.mark.parametrize("group", GROUPS)
def test_every_group_lists_runnable_modules_that_resolve(group: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert importlib.util.find_spec(f"{group}.__main__") is not None
    found = benchmarks_of(group)
    assert found, f"{group} lists no benchmark"
    for bench in found:
        assert importlib.util.find_spec(bench.module) is not None, bench.module
        assert bench.question and first_sentence(bench.question) == bench.question
    assert listing.main(group) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 + len(found) and all(b.command in line for b, line in zip(found, lines[1:], strict=True))


def test_no_module_shares_its_package_name() -> None:
    """``benchmarks/learning/learning.py`` would read as the package: a module's name says what it is."""
    same = [
        str(path.relative_to(REPO_ROOT))
        for path in (REPO_ROOT / "benchmarks").rglob("*.py")
        if "results" not in path.parts and path.stem == path.parent.name
    ]
    assert same == []
