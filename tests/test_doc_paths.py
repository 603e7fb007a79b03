"""Every repository path README.md and docs/ name exists: a backticked path under one of the repository's top-level
folders (``relay/models/attention.py``, ``tests/driver/``, ``configs/tiny.yaml``; ``path::name`` checks the path) and
every relative Markdown link. Patterns (``<run>``, ``*``, ``[-quick]``), run outputs and metric keys
(``data/epochs_done``, found in the metric catalog) are not repository paths."""

from __future__ import annotations

import re
from pathlib import Path

from relay.metrics import lookup
from relay.repo import REPO_ROOT

TOP_LEVEL = ("relay/", "roles/", "driver/", "placement/", "tests/", "benchmarks/", "configs/", "docs/", "scripts/")
TOP_LEVEL += ("requirements/", "data/", ".ci/")
NAMED = re.compile(r"`([^`\s]+)`|\]\(([^)\s#]+)(?:#[^)]*)?\)")
PATTERN_CHARS = set("<>*{}$[]")


def named_paths(doc: Path) -> list[tuple[str, Path]]:
    """``(as written, resolved)`` for each repository path ``doc`` names."""
    out = []
    for match in NAMED.finditer(doc.read_text()):
        code, link = match.groups()
        text = (code or link).split("::")[0].rstrip(".,:;")
        if PATTERN_CHARS & set(text) or text.startswith(("http:", "https:", "mailto:")):
            continue
        if code is not None and (not text.startswith(TOP_LEVEL) or lookup(text) is not None):
            continue
        out.append((text, (doc.parent if link else REPO_ROOT) / text))
    return out


def test_every_named_path_exists() -> None:
    docs = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
    missing = [f"{doc.name}: {text}" for doc in docs for text, path in named_paths(doc) if not path.exists()]
    assert missing == []


def test_the_reader_finds_code_paths_and_links(tmp_path) -> None:
    doc = tmp_path / "page.md"
    doc.write_text("See `relay/repo.py::REPO_ROOT`, [the map](other.md#top), `outputs/<run>` and `data.max_len`.")
    assert [text for text, _ in named_paths(doc)] == ["relay/repo.py", "other.md"]
