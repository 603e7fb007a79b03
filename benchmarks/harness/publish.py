"""Where a benchmark's result goes: its JSON under ``benchmarks/results/``, its section between marks in
BENCHMARKS.md, and the paths it names shown relative to the repository."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from relay.repo import REPO_ROOT


def shown_path(path: Path | str) -> str:
    """``path`` relative to the repository when it is inside it (a preset), else as given (a file elsewhere)."""
    resolved = Path(path).resolve()
    return str(resolved.relative_to(REPO_ROOT)) if resolved.is_relative_to(REPO_ROOT) else str(path)


def write_section(path: Path, section: str, marks: tuple[str, str], title: str) -> None:
    """Replace the text between the ``marks`` of ``path`` (appended under ``title`` with the marks if absent)."""
    begin, end = marks
    text = path.read_text()
    block = f"{begin}\n{section}\n{end}"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + f"\n\n## {title}\n\n" + block + "\n"
    path.write_text(text)


def publish(
    name: str,
    result: dict[str, Any],
    section: str,
    marks: tuple[str, str],
    title: str,
    write: bool,
    out: Path | None = None,
) -> None:
    """Print ``section``; with ``out``, first save it as ``out/report.md`` and ``result`` as ``out/results.json``;
    with ``write``, also as ``benchmarks/results/<name>.json`` and between the ``marks`` of BENCHMARKS.md
    (:func:`write_section`)."""
    if out is not None:
        (out / "report.md").write_text(section + "\n")
        (out / "results.json").write_text(json.dumps(result, indent=2))
    if write:
        (REPO_ROOT / "benchmarks" / "results" / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        write_section(REPO_ROOT / "BENCHMARKS.md", section, marks, title)
    print(section)
