"""What ``python -m benchmarks.<group>`` prints: each benchmark of the group (a module that runs as a script), the
question its docstring opens with, and the command that runs it. Read from the source, so listing a group imports
none of its benchmarks."""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from relay.repo import REPO_ROOT

_ROLE = re.compile(r":\w+:`~?([^`]+)`")  # :mod:`benchmarks.faults.chaos` -> benchmarks.faults.chaos
_SENTENCE_END = re.compile(r"(?<=[.?!])\s")


@dataclass(frozen=True)
class Benchmark:
    module: str  # dotted, e.g. benchmarks.faults.chaos
    question: str  # the docstring's first sentence, as plain text

    @property
    def command(self) -> str:
        return f"python -m {self.module}"


def first_sentence(docstring: str) -> str:
    """The first sentence of ``docstring``'s first paragraph on one line, without reST roles or literal quotes.

    >>> first_sentence("Where a sync's time goes: the publish\\nand the load, measured.  More here.\\n\\nUsage")
    "Where a sync's time goes: the publish and the load, measured."
    >>> first_sentence("What :mod:`benchmarks.faults.chaos` found: ``chaos.jsonl``")
    'What benchmarks.faults.chaos found: chaos.jsonl'
    """
    paragraph = " ".join(docstring.strip().split("\n\n", 1)[0].split())
    plain = _ROLE.sub(r"\1", paragraph).replace("``", "")
    return _SENTENCE_END.split(plain, 1)[0]


def _runs_as_script(tree: ast.Module) -> bool:
    """Whether the module has an ``if __name__ == "__main__":`` block."""
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            names = [node.test.left, *node.test.comparators]
            if any(isinstance(n, ast.Name) and n.id == "__name__" for n in names):
                return True
    return False


def benchmarks_of(package: str, root: Path = REPO_ROOT) -> list[Benchmark]:
    """The modules of ``package`` (dotted, under ``root``) that run as scripts, by name; helpers are left out."""
    found = []
    for path in sorted((root / package.replace(".", "/")).glob("*.py")):
        if path.stem.startswith("__"):
            continue
        tree = ast.parse(path.read_text())
        if _runs_as_script(tree):
            found.append(Benchmark(f"{package}.{path.stem}", first_sentence(ast.get_docstring(tree) or "")))
    return found


def listing(package: str, root: Path = REPO_ROOT) -> list[str]:
    """The lines ``python -m <package>`` prints: the group's own docstring's first sentence, then one line per
    benchmark, its command padded to one column and its question."""
    init = root / package.replace(".", "/") / "__init__.py"
    head = first_sentence(ast.get_docstring(ast.parse(init.read_text())) or package)
    found = benchmarks_of(package, root)
    width = max((len(b.command) for b in found), default=0)
    return [f"{package}: {head}", *(f"  {b.command:<{width}}  {b.question}" for b in found)]


def main(package: str) -> int:
    print("\n".join(listing(package)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
