"""The product and the benchmarks spell no metric key as a string: every writer and reader takes the key from the
catalog (``from relay.metrics import system as sm``; ``metrics[sm.TIMING_STEP]``, ``sm.MEMORY_PEAK_RSS.format(...)``).

The check parses every ``.py`` file of :data:`CHECKED` (``relay/metrics`` itself left out) with :mod:`ast` and
flags a string constant, or the literal start of an f-string, that is a metric key by one of two rules:

1. it has a ``/`` and :func:`relay.metrics.lookup` finds its entry: a whole key, a template's instance included
   (``"memory/rollout_peak_rss_gib"``);
2. it starts with ``<family>/`` for a family of :data:`KEY_FAMILIES`: a family prefix (``"timing/"``) or the start
   of a key built in an f-string (``f"val/{subset}/accuracy_greedy"``).

Rule 2 leaves out the families in :data:`PATH_FAMILIES`, whose names are also directories a string may name:
``"data/gsm8k/train.jsonl"`` is a file under the repository's ``data/``; that family's keys (``data/epochs_done``)
are still caught by rule 1. Rule 1 leaves out keys without a ``/``: the one such key, ``step``, is also the word
that labels plot axes, trace events and progress bars; code that reads the metric row's step uses ``sm.STEP``.
Docstrings and other bare string statements are prose and are not checked.
"""

from __future__ import annotations

import ast
from pathlib import Path

from relay.metrics import CATALOG, lookup
from relay.repo import REPO_ROOT

# The product's directories and top-level modules, and the benchmarks, as paths under the repository.
CHECKED = ("driver", "roles", "relay", "placement", "trainer.py", "submit.py", "benchmarks")
EXCLUDED = ("relay/metrics",)
# The catalog's families whose "<family>/" prefix always starts a metric key.
KEY_FAMILIES = frozenset(
    {
        "actor",
        "actor_ref",
        "advantage",
        "agent",
        "batch",
        "curriculum",
        "filter",
        "learner",
        "logprob_gap",
        "memory",
        "offpolicy",
        "recovery",
        "remax",
        "response",
        "reward",
        "reward_model",
        "rollout",
        "sft",
        "sync",
        "throughput",
        "time",
        "timing",
        "val",
        "validation",
    }
)
# The catalog's families whose name is also a directory that paths start with.
PATH_FAMILIES = frozenset({"data"})


def literal_keys(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of each string constant or f-string start in ``source`` that is a metric key (the module
    docstring's rules), in line order."""
    tree = ast.parse(source)
    skipped: set[int] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):  # a docstring or bare string
            skipped.add(id(node.value))
        elif isinstance(node, ast.JoinedStr):
            skipped.update(id(part) for part in node.values)
            first = node.values[0] if node.values else None
            if isinstance(first, ast.Constant) and is_key(first.value):
                found.append((node.lineno, ast.unparse(node)))
    for node in ast.walk(tree):
        is_string = isinstance(node, ast.Constant) and isinstance(node.value, str)
        if is_string and id(node) not in skipped and is_key(node.value):
            found.append((node.lineno, repr(node.value)))
    return sorted(found)


def is_key(text: str) -> bool:
    """Whether ``text`` is a metric key or a key family's prefix (rules 1 and 2)."""
    if "/" not in text:
        return False
    return text.split("/", 1)[0] in KEY_FAMILIES or lookup(text) is not None


def product_files() -> list[Path]:
    """Every ``.py`` file under :data:`CHECKED`, less :data:`EXCLUDED`."""
    files = []
    for name in CHECKED:
        path = REPO_ROOT / name
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return [f for f in files if not any(f.relative_to(REPO_ROOT).is_relative_to(e) for e in EXCLUDED)]


def test_every_metric_key_comes_from_the_catalog() -> None:
    found = [
        f"{path.relative_to(REPO_ROOT)}:{line}: {text}"
        for path in product_files()
        for line, text in literal_keys(path.read_text())
    ]
    assert not found, "metric keys spelled as strings; use the relay.metrics constants:\n" + "\n".join(found)


def test_every_family_is_a_key_family_or_a_path_family() -> None:
    families = {m.family for m in CATALOG.values() if "/" in m.name}
    assert families == KEY_FAMILIES | PATH_FAMILIES, "put a new family in KEY_FAMILIES or PATH_FAMILIES"
    assert not KEY_FAMILIES & PATH_FAMILIES


def test_the_rules_catch_keys_and_spare_paths_and_prose() -> None:
    source = '''
"""timing/step in a docstring is prose."""
a = m["timing/step"]
b = m["memory/rollout_peak_rss_gib"]
c = f"val/{subset}/accuracy_greedy"
d = key.startswith("throughput/")
e = m["data/epochs_done"]
f = open("data/gsm8k/train.jsonl")
g = f"data/{name}.jsonl"
h = ax.set_xlabel("step")
i = "outputs/run/metrics.jsonl"
'''
    assert [line for line, _ in literal_keys(source)] == [3, 4, 5, 6, 7]
