"""``docs/architecture.md``'s module map names every module of the product, and only those."""

from __future__ import annotations

import re

from relay.repo import REPO_ROOT

PACKAGES = ("relay", "roles", "driver", "placement")
MODULE = re.compile(r"`((?:relay|roles|driver|placement)/[\w/]+\.py|trainer\.py|submit\.py)`")


def _map_section() -> str:
    text = (REPO_ROOT / "docs" / "architecture.md").read_text()
    start = text.index("## Module map")
    return text[start : text.index("\n## ", start + 1)]


def test_the_module_map_matches_the_tree() -> None:
    named = set(MODULE.findall(_map_section()))
    tree = {
        str(path.relative_to(REPO_ROOT))
        for package in PACKAGES
        for path in (REPO_ROOT / package).rglob("*.py")
        if path.name != "__init__.py"
    } | {"trainer.py", "submit.py"}
    assert sorted(tree - named) == [], "modules missing from docs/architecture.md's module map"
    assert sorted(named - tree) == [], "the module map names modules that do not exist"
