"""The metric reference in ``docs/monitoring.md``, generated from the catalog (:mod:`relay.metrics`):

    python -m relay.metrics.reference --write      # regenerate the section between the markers
    python -m relay.metrics.reference --check      # exit 1 when it is stale

One table per family (the key's first segment), in the order the catalog declares them: the key (a template's
``{field}`` stands for a role, a subset, ``k`` ...), its unit, what computes it and what it means.
"""

from __future__ import annotations

import sys
from pathlib import Path

from relay.doc_section import section_command, with_section
from relay.metrics import CATALOG

# found from this file: relay/metrics imports only relay/doc_section.py of the rest of relay
REFERENCE_PATH = Path(__file__).resolve().parents[2] / "docs" / "monitoring.md"
BEGIN, END = "<!-- metric-reference:begin -->", "<!-- metric-reference:end -->"


def render() -> str:
    """The section's Markdown: a table per family."""
    families: dict[str, list] = {}
    for metric in CATALOG.values():
        families.setdefault(metric.family, []).append(metric)
    lines = []
    for family, metrics in families.items():
        lines += ["", f"**`{family}`**", "", "| key | unit | from | meaning |", "|---|---|---|---|"]
        lines += [f"| `{m.name}` | {m.unit} | {m.producer} | {m.meaning} |" for m in metrics]
    return "\n".join(lines[1:])


def with_reference(text: str) -> str:
    """``text`` (the page) with the section between :data:`BEGIN` and :data:`END` replaced by :func:`render`."""
    return with_section(text, BEGIN, END, render())


def main(argv: list[str] | None = None) -> int:
    return section_command(__doc__.splitlines()[0], REFERENCE_PATH, BEGIN, END, render, "relay.metrics.reference", argv)


if __name__ == "__main__":
    sys.exit(main())
