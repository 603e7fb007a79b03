"""A generated section of a Markdown page, between two marker comments, and the ``--write`` / ``--check`` command
that keeps it current (the metric reference in ``docs/monitoring.md``, the role table in ``docs/architecture.md``).

>>> with_section("a <!-- s --> old <!-- e --> b", "<!-- s -->", "<!-- e -->", "new")
'a <!-- s -->\\nnew\\n<!-- e --> b'
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def with_section(text: str, begin: str, end: str, body: str) -> str:
    """``text`` with what stands between ``begin`` and ``end`` replaced by ``body`` (on lines of its own)."""
    head, rest = text.split(begin, 1)
    return f"{head}{begin}\n{body}\n{end}{rest.split(end, 1)[1]}"


def section_command(
    description: str, page: Path, begin: str, end: str, render: Callable[[], str], module: str, argv: list[str] | None
) -> int:
    """``--write`` rewrites the section of ``page`` from ``render()``; ``--check`` exits 1 when it is stale, naming
    the command that regenerates it (``python -m <module> --write``)."""
    parser = argparse.ArgumentParser(description=description)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help=f"rewrite the section of {page.name}")
    mode.add_argument("--check", action="store_true", help="exit 1 when the section is stale")
    args = parser.parse_args(argv)
    text = page.read_text()
    updated = with_section(text, begin, end, render())
    if args.write:
        page.write_text(updated)
        print(f"wrote {page}")
        return 0
    if updated == text:
        return 0
    print(f"{page} is stale: run python -m {module} --write", file=sys.stderr)
    return 1
