"""Check that every pin of ``requirements/*.lock`` is served by a public index with a file this interpreter installs.

For each ``name==version`` line it reads the index's project page (PEP 691 JSON of the Simple API, pip's own source
of truth) and looks for a wheel whose tags this interpreter supports, or a source distribution, of exactly that
version, not yanked. Pip's local configuration (find-links, extra indexes, constraints) is not consulted: a pin that
resolves only through a local wheel directory fails here. A local version (``torch==2.13.0+cpu``) is looked up on the
index named for it in :data:`INDEX_FOR_LOCAL`.

    python scripts/check_pins.py            # every lock; exit 1 if any pin is not served
    python scripts/check_pins.py requirements/dev.lock
"""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Iterable
from pathlib import Path

from packaging.tags import Tag, sys_tags
from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import Version

PYPI = "https://pypi.org/simple"
# Builds PyPI does not serve, by their local version label: PyTorch's CPU wheels.
INDEX_FOR_LOCAL = {"cpu": "https://download.pytorch.org/whl/cpu"}
ACCEPT = "application/vnd.pypi.simple.v1+json"


def read_pins(lock: Path) -> list[tuple[str, str]]:
    """``(name, version)`` of every ``name==version`` line (comments and blank lines skipped)."""
    pins = []
    for line in lock.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            if not version:
                raise ValueError(f"{lock}: {line!r} is not pinned with ==")
            pins.append((name.strip(), version.strip()))
    return pins


def installable_files(files: Iterable[dict], name: str, version: str, tags: frozenset[Tag] | None = None) -> list[dict]:
    """The not-yanked files of ``name==version`` in a PEP 691 ``files`` list that this interpreter can install:
    wheels with a supported tag first (what pip prefers), then source distributions.

    >>> files = [{"filename": "a-1.0.tar.gz"}, {"filename": "a-1.0-py3-none-any.whl"},
    ...          {"filename": "a-1.0-py2-none-any.whl", "yanked": True}, {"filename": "a-1.1-py3-none-any.whl"}]
    >>> [f["filename"] for f in installable_files(files, "a", "1.0", frozenset(sys_tags()))]
    ['a-1.0-py3-none-any.whl', 'a-1.0.tar.gz']
    """
    tags = frozenset(sys_tags()) if tags is None else tags
    want, wanted_name = Version(version), canonicalize_name(name)
    found = []
    for f in files:
        filename = f["filename"]
        if f.get("yanked"):
            continue
        try:
            if filename.endswith(".whl"):
                wheel_name, wheel_version, _, wheel_tags = parse_wheel_filename(filename)
                ok = wheel_name == wanted_name and wheel_version == want and bool(wheel_tags & tags)
            else:
                sdist_name, sdist_version = parse_sdist_filename(filename)
                ok = sdist_name == wanted_name and sdist_version == want
        except ValueError:  # a file name packaging cannot read (an old egg, an exe): not an installable candidate
            continue
        if ok:
            found.append(f)
    return sorted(found, key=lambda f: not f["filename"].endswith(".whl"))


def index_for(version: str) -> str:
    local = Version(version).local
    return INDEX_FOR_LOCAL.get(local or "", PYPI) if local else PYPI


def project_files(index: str, name: str) -> list[dict]:
    request = urllib.request.Request(f"{index}/{canonicalize_name(name)}/", headers={"Accept": ACCEPT})
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - a public package index
        return json.loads(response.read())["files"]


def check(locks: list[Path]) -> int:
    """Print one line per pin and the download size per index; return the number of pins not confirmed."""
    failures, size_by_index = 0, dict.fromkeys([PYPI, *INDEX_FOR_LOCAL.values()], 0)
    for lock in locks:
        for name, version in read_pins(lock):
            index = index_for(version)
            try:
                files = installable_files(project_files(index, name), name, version)
                verdict = f"ok ({files[0]['filename']})" if files else "NOT SERVED: no installable file of this version"
            except OSError as exc:
                files, verdict = [], f"NOT CHECKED: {index} unreachable ({exc})"
            failures += not files
            size_by_index[index] += files[0].get("size", 0) if files else 0
            print(f"{lock.name}: {name}=={version} [{index}] {verdict}")
    for index, size in size_by_index.items():
        print(f"download from {index}: {size / 1e9:.2f} GB (the files above)")
    return failures


def main() -> None:
    locks = [Path(a) for a in sys.argv[1:]] or sorted(Path(__file__).parent.parent.glob("requirements/*.lock"))
    failures = check(locks)
    print(f"{failures} pin(s) not confirmed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
