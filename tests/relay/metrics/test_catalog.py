"""The metric catalog: its lookup of written keys (templates included), its refusals, and the reference in
docs/monitoring.md generated from it."""

from __future__ import annotations

import pytest

from relay.metrics import CATALOG, lookup
from relay.metrics.catalog import declare
from relay.metrics.reference import REFERENCE_PATH, with_reference


def test_lookup_finds_keys_and_template_families() -> None:
    assert lookup("timing/step").unit == "s"
    assert lookup("memory/tools_peak_rss_gib").name == "memory/{role}_peak_rss_gib"
    assert lookup("memory/roles_peak_rss_gib").name == "memory/roles_peak_rss_gib"  # its own entry before a template
    assert lookup("val/pass@8").name == "val/pass@{k}"
    assert lookup("val/basic_arithmetic/lenient_accuracy_greedy").name == "val/{subset}/lenient_accuracy_greedy"
    assert lookup("timing/update_compute").name == "timing/{role}_compute"
    assert lookup("made/up") is None and lookup("val/a/b/accuracy_greedy") is None


def test_a_second_declaration_or_an_unknown_unit_is_refused() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        declare("timing/step", "s", "again", "driver")
    with pytest.raises(ValueError, match="unit 'minutes'"):
        declare("timing/new_phase", "minutes", "a phase", "driver")
    assert "timing/new_phase" not in CATALOG


def test_every_entry_has_a_meaning_and_a_producer() -> None:
    assert all(m.meaning and m.producer for m in CATALOG.values())


def test_the_reference_in_docs_monitoring_is_current() -> None:
    text = REFERENCE_PATH.read_text()
    assert with_reference(text) == text, "run python -m relay.metrics.reference --write"
