"""The role table in docs/architecture.md is the declarations'."""

from __future__ import annotations

from relay.role_declarations import ROLE_NAMES
from relay.role_table import TABLE_PATH, render, with_table


def test_the_table_in_docs_architecture_is_current() -> None:
    text = TABLE_PATH.read_text()
    assert with_table(text) == text, "run python -m relay.role_table --write"


def test_the_table_has_a_row_per_declared_role() -> None:
    rows = render().splitlines()[2:]
    assert [row.split(" | ")[0].strip("| `") for row in rows] == list(ROLE_NAMES)
    page = TABLE_PATH.read_text()
    stale = page.replace("| row shares |", "| rows |", 1)  # a hand edit of the section
    assert stale != page and with_table(stale) != stale  # the check above would fail on it
    assert with_table(stale) == page  # the section is rewritten whole from the declarations
