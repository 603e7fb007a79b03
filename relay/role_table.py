"""The role declarations' table in ``docs/architecture.md`` ("Roles"), generated from
:mod:`relay.role_declarations`:

    python -m relay.role_table --write      # regenerate the section between the markers
    python -m relay.role_table --check      # exit 1 when it is stale
"""

from __future__ import annotations

import sys

from relay.doc_section import section_command, with_section
from relay.repo import REPO_ROOT
from relay.role_declarations import ROLE_DECLARATIONS, RoleDeclaration

TABLE_PATH = REPO_ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- role-declarations:begin -->", "<!-- role-declarations:end -->"
COLUMNS = ("role", "what it does", "actor class", "group", "actors", "memory estimate", "restart", "weights",
           "batch", "stale answers")  # fmt: skip


def _code(path: str | None) -> str:
    return f"`{path.replace(':', '.')}`" if path else "-"


def _row(r: RoleDeclaration) -> list[str]:
    batch = {"rows": "row shares", "first": "rank 0, whole batch", "caller": f"called by {r.called_by}"}[r.dispatch]
    weights = {"policy": "every sync", "actor_copy": "with an actor copy", "none": "-"}[r.weights]
    restart = {"relay": "restarted, call sent again", "never": "never (state lost): --resume"}[r.restart]
    return [f"`{r.name}`", r.summary, _code(r.actor), _code(r.group), _code(r.slots), _code(r.memory), restart,
            weights, batch, _code(r.stale_metric)]  # fmt: skip


def render() -> str:
    """The table's Markdown, a row per declared role."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    return "\n".join([*lines, *("| " + " | ".join(_row(r)) + " |" for r in ROLE_DECLARATIONS)])


def with_table(text: str) -> str:
    """``text`` (the page) with the section between :data:`BEGIN` and :data:`END` replaced by :func:`render`."""
    return with_section(text, BEGIN, END, render())


def main(argv: list[str] | None = None) -> int:
    return section_command(__doc__.splitlines()[0], TABLE_PATH, BEGIN, END, render, "relay.role_table", argv)


if __name__ == "__main__":
    sys.exit(main())
