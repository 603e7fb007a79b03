"""Every benchmark module the docs tell a reader to run (``python -m benchmarks.…``) or name by dotted path
(``benchmarks.harness.toy_reward:token_share_reward``) exists, so a moved benchmark cannot rot in the docs."""

from __future__ import annotations

import importlib.util
import re

from relay.repo import REPO_ROOT

RUN = re.compile(r"python -m (benchmarks(?:\.\w+)*)")
TARGET = re.compile(r"(?<![\w./])(benchmarks(?:\.\w+)+):\w+")
DOCS = ("README.md", "BENCHMARKS.md", "docs/*.md")


def named_modules(text: str) -> set[str]:
    """The dotted benchmark modules ``text`` runs with ``python -m`` or names as ``module:attribute``."""
    return set(RUN.findall(text)) | set(TARGET.findall(text))


def test_the_reader_finds_commands_and_targets() -> None:
    text = "Run `python -m benchmarks.speed.run --quick`, then python -m benchmarks.faults. Set\n"
    text += "`reward.function=benchmarks.harness.toy_reward:token_share_reward`; see benchmarks/results/run.json."
    assert named_modules(text) == {"benchmarks.speed.run", "benchmarks.faults", "benchmarks.harness.toy_reward"}


def test_every_documented_benchmark_module_resolves() -> None:
    docs = sorted({path for pattern in DOCS for path in REPO_ROOT.glob(pattern)})
    assert len(docs) > 3
    named = {
        (doc.relative_to(REPO_ROOT).as_posix(), module) for doc in docs for module in named_modules(doc.read_text())
    }
    assert len({module for _, module in named}) > 20
    missing = sorted(f"{doc}: {module}" for doc, module in named if importlib.util.find_spec(module) is None)
    assert missing == []
