"""The product speaks of the product: no work-log words in the docs, the configs, or the code's comments and
docstrings. History (which session or issue changed what) belongs in commit messages; a reader of Relay's files
needs what Relay does, its measurements (machine, date, command) and the reasons for its choices."""

from __future__ import annotations

import re
import subprocess

from relay.repo import REPO_ROOT

WORK_LOG = re.compile(
    r"\b(?:session|issue)s?[ -]?#?\d+|\b(?:this|last|previous|earlier|next) session\b|\bsessions? \d+",
    re.IGNORECASE,
)
SUFFIXES = (".py", ".md", ".yaml", ".yml", ".sh", ".toml", ".txt", ".json")
THIS_FILE = "tests/test_product_words.py"  # its pattern's own examples


def tracked_text_files() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
    return [f for f in out.splitlines() if f.endswith(SUFFIXES) and f != THIS_FILE and not f.startswith("data/")]


def test_the_pattern_catches_work_log_wording() -> None:
    # Built from parts, so that this file holds no work-log wording itself.
    caught = [
        f"as in {word}{sep}{number}" for word in ("session", "Issue") for sep in (" ", "-", " #") for number in (9, 16)
    ]
    caught += [f"{when} {'session'}'s VM" for when in ("this", "last", "previous")]
    for text in caught:
        assert WORK_LOG.search(text), text
    for text in ("a Ray session directory", "the issues users report", "--session-dir"):
        assert not WORK_LOG.search(text), text


def test_no_work_log_words_in_tracked_files() -> None:
    hits = []
    for name in tracked_text_files():
        path = REPO_ROOT / name
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
            if WORK_LOG.search(line):
                hits.append(f"{name}:{number}: {line.strip()[:120]}")
    assert not hits, "work-log wording (say what Relay does and why instead):\n" + "\n".join(hits)
