"""Every metric catalog entry has a writer in the product: no entry outlives the code that wrote it.

The tiny runs check the other direction (every key a run writes is catalogued: ``tests/tiny_runs.py``); many
entries are written only on paths a tiny run does not take (ReMax, the group filter, a restart), so this side is
read from the source. An entry is written when the product names its constant outside ``relay/metrics``, or it is
one of the families written by derived names: the learner's objective figures (``actor/<name>``, ``val/<name>``
for a warm start's held-out loss: ``ACTOR_PREFIX`` / ``VAL_PREFIX`` + the objective's dict key), validation's
per-subset twins (``val/{subset}/<figure>``: ``subset_key`` of a written ``val/<figure>``) and lenient twins
(``val/lenient_<figure>``: ``lenient_key`` of a written strict figure).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from relay.repo import REPO_ROOT

PRODUCT = ("driver", "placement", "relay", "roles", "trainer.py", "submit.py")
# Where the objective's figures get their short names (the dict keys the learner prefixes).
SHORT_NAME_WRITERS = ("relay/learner", "relay/grpo", "roles/learner.py")
PREFIXED = {"actor/": SHORT_NAME_WRITERS, "val/": SHORT_NAME_WRITERS}


def _files(paths: tuple[str, ...]) -> list[Path]:
    out = []
    for name in paths:
        path = REPO_ROOT / name
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return out


def declared() -> dict[str, str]:
    """``{constant: key}`` of every ``NAME = declare("key", ...)`` in relay/metrics."""
    out = {}
    for path in _files(("relay/metrics",)):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                func = node.value.func
                if isinstance(func, ast.Name) and func.id == "declare" and isinstance(node.targets[0], ast.Name):
                    out[node.targets[0].id] = node.value.args[0].value
    return out


def _text(paths: tuple[str, ...], skip: str | None = None) -> str:
    return "\n".join(p.read_text() for p in _files(paths) if skip is None or not p.is_relative_to(REPO_ROOT / skip))


def unwritten() -> list[str]:
    """The catalog keys no product code writes, by the rules of the module docstring."""
    source = _text(PRODUCT, skip="relay/metrics")
    names = declared()
    by_name = {key for name, key in names.items() if re.search(rf"\b{name}\b", source)}
    writers = {prefix: _text(paths) for prefix, paths in PREFIXED.items()}

    def written(key: str) -> bool:
        if key in by_name:
            return True
        for prefix, text in writers.items():
            short = key.removeprefix(prefix)
            if key.startswith(prefix) and "/" not in short and f'"{short}"' in text:
                return True
        for twin_of, function in (("{subset}/", "subset_key("), ("lenient_", "lenient_key(")):
            if twin_of in key and function in source and written(key.replace(twin_of, "", 1)):
                return True
        return False

    return [key for key in names.values() if not written(key)]


def test_every_catalog_entry_has_a_writer() -> None:
    assert len(declared()) > 150  # the parse finds the catalog
    assert unwritten() == [], "catalog entries nothing writes: delete them or write them"


def test_an_entry_without_a_writer_is_found(monkeypatch) -> None:
    real = declared()
    fake = {**real, "VAL_NEVER_WRITTEN": "val/never_written", "VAL_SUBSET_NEVER": "val/{subset}/never_written"}
    monkeypatch.setattr(sys.modules[__name__], "declared", lambda: fake)
    assert unwritten() == ["val/never_written", "val/{subset}/never_written"]
