"""The metric reference in ``docs/monitoring.md``, generated from the catalog (:mod:`relay.metrics`):

    python -m relay.metrics.reference --write      # regenerate the section between the markers
    python -m relay.metrics.reference --check      # exit 1 when it is stale

One table per family (the key's first segment), in the order the catalog declares them: the key (a template's
``{field}`` stands for a role, a subset, ``k`` ...), its unit, what computes it and what it means.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from relay.metrics import CATALOG

# found from this file: relay/metrics imports no other part of relay
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
    head, rest = text.split(BEGIN, 1)
    return f"{head}{BEGIN}\n{render()}\n{END}{rest.split(END, 1)[1]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the section of docs/monitoring.md")
    mode.add_argument("--check", action="store_true", help="exit 1 when the section is stale")
    args = parser.parse_args(argv)
    text = Path(REFERENCE_PATH).read_text()
    updated = with_reference(text)
    if args.write:
        Path(REFERENCE_PATH).write_text(updated)
        print(f"wrote {REFERENCE_PATH}")
        return 0
    if updated == text:
        return 0
    print(f"{REFERENCE_PATH} is stale: run python -m relay.metrics.reference --write", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
