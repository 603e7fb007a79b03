"""Every import points down the layers, and no module imports itself back through others.

The check reads every ``.py`` file's imports with :mod:`ast`, the ones inside functions included (a lazy import is
still a dependency), and resolves each to the project module it names. ``docs/architecture.md`` ("Layers") states
the same order.
"""

from __future__ import annotations

import ast
from pathlib import Path

from relay.repo import REPO_ROOT

# Top-level layers, lowest first: a module may import its own layer and the layers before it.
LAYERS = ("relay", "placement", "roles", "driver", "entry", "benchmarks", "tests")
ENTRY_POINTS = ("trainer", "evaluate", "submit")
# Inside relay/, lowest first: a subpackage (or top-level module) may import its own rank and lower ones.
RELAY_RANKS: tuple[tuple[str, ...], ...] = (
    (
        "repo",
        "process_identity",
        "data_proto",
        "packing",
        "shared_weights",
        "rank_metrics",
        "metrics",
        "faults",
        "role_declarations",
        "role_table",
        "doc_section",
    ),
    ("models", "grpo", "scoring", "data", "tasks", "checkpoint", "tools"),
    ("engines", "learner"),
    ("rollout_batch", "evaluation", "agent", "sft"),
    ("config",),
    ("run",),
)
PROJECT = {*LAYERS[:4], *ENTRY_POINTS, "benchmarks", "tests"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    """Every project module by its dotted name (tests and benchmarks included)."""
    out = {}
    for path in REPO_ROOT.rglob("*.py"):
        rel = path.relative_to(REPO_ROOT)
        if rel.parts[0] in {".venv", "outputs", "data", ".git"} or rel.parts[0].startswith("."):
            continue
        out[_module_name(path)] = path
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``path`` imports, at module level or inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        for name in names:
            if name.split(".")[0] in PROJECT:
                target = _resolve(name, modules)
                if target is not None:
                    found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(path, modules) - {name} for name, path in modules.items()}


def layer_of(module: str) -> int:
    top = module.split(".")[0]
    return LAYERS.index("entry" if top in ENTRY_POINTS else top)


def relay_rank(module: str) -> int:
    """The rank of a ``relay.*`` module's subpackage in :data:`RELAY_RANKS` (``relay`` itself: the top)."""
    parts = module.split(".")
    if len(parts) == 1:
        return len(RELAY_RANKS)
    for rank, names in enumerate(RELAY_RANKS):
        if parts[1] in names:
            return rank
    raise AssertionError(f"{module}: relay/{parts[1]} has no rank in RELAY_RANKS; add it where it belongs")


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``"a -> b"`` for each import from a lower layer (or relay rank) to a higher one."""
    bad = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            up = layer_of(target) > layer_of(module)
            if not up and module.startswith("relay") and target.startswith("relay"):
                up = relay_rank(target) > relay_rank(module)
            if up:
                bad.append(f"{module} -> {target}")
    return bad


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_no_upward_import() -> None:
    assert upward_imports(import_graph()) == []


def test_no_import_cycle() -> None:
    assert import_cycles(import_graph()) == []


def cross_group_imports(graph: dict[str, set[str]]) -> list[str]:
    """``"a -> b"`` for each import from one benchmark group (``benchmarks/speed/``, ...) into another, or from
    ``benchmarks/harness/`` into any group: a group imports only itself and the harness."""

    def group(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if parts[0] == "benchmarks" and len(parts) > 2 else None

    bad = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            source, dest = group(module), group(target)
            if source and dest and dest not in {source, "harness"}:
                bad.append(f"{module} -> {target}")
    return bad


def test_a_benchmark_group_imports_only_itself_and_the_harness() -> None:
    assert cross_group_imports(import_graph()) == []
    graph = {
        "benchmarks.gpu.learner": {"benchmarks.speed.learner", "benchmarks.harness.flops"},
        "benchmarks.harness.publish": {"benchmarks.learning.curve"},
        "benchmarks.learning.race": {"benchmarks.learning.curve", "benchmarks.harness.publish"},
    }
    assert cross_group_imports(graph) == [
        "benchmarks.gpu.learner -> benchmarks.speed.learner",
        "benchmarks.harness.publish -> benchmarks.learning.curve",
    ]


def test_the_checks_catch_an_upward_import_and_a_cycle() -> None:
    graph = {
        "relay.packing": {"relay.config.load"},  # a base module reaching up into the config
        "relay.config.load": set(),
        "placement.fit": {"placement.memory_check"},
        "placement.memory_check": {"placement.fit"},
        "driver.step": {"roles.rollout"},
        "roles.rollout": {"driver.step"},
    }
    assert upward_imports(graph) == ["relay.packing -> relay.config.load", "roles.rollout -> driver.step"]
    assert import_cycles(graph) == [["driver.step", "roles.rollout"], ["placement.fit", "placement.memory_check"]]


def test_the_core_package_needs_no_ray() -> None:
    """``relay/`` is the part that needs no Ray: none of its modules imports it."""
    users = []
    for name, path in project_modules().items():
        if name.split(".")[0] == "relay":
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "ray" for a in node.names):
                    users.append(name)
                if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ray":
                    users.append(name)
    assert sorted(set(users)) == []
