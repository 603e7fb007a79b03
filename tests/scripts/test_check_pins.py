"""The pin check's reading of locks and index pages (no network: hand-built PEP 691 file lists)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from packaging.tags import Tag

from relay.repo import REPO_ROOT

_spec = importlib.util.spec_from_file_location("check_pins", REPO_ROOT / "scripts" / "check_pins.py")
check_pins = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_pins)

CP311_LINUX = frozenset({Tag("cp311", "cp311", "manylinux_2_28_x86_64"), Tag("py3", "none", "any")})


def test_every_lock_line_is_an_exact_pin(tmp_path: Path) -> None:
    for lock in sorted((REPO_ROOT / "requirements").glob("*.lock")):
        assert check_pins.read_pins(lock), lock
    bad = tmp_path / "bad.lock"
    bad.write_text("# a comment\nnumpy==2.0.0  # why\nrequests>=2\n")
    with pytest.raises(ValueError, match=r"'requests>=2' is not pinned with =="):
        check_pins.read_pins(bad)


def test_only_an_installable_file_of_the_exact_version_counts() -> None:
    files = [
        {"filename": "torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl"},  # another Python
        {"filename": "torch-2.13.0-cp311-cp311-win_amd64.whl"},  # another platform
        {"filename": "torch-2.13.1-cp311-cp311-manylinux_2_28_x86_64.whl"},  # another version
        {"filename": "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl", "yanked": "broken"},
    ]
    assert check_pins.installable_files(files, "torch", "2.13.0", CP311_LINUX) == []
    served = {"filename": "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "size": 10}
    assert check_pins.installable_files([*files, served], "torch", "2.13.0+cpu", CP311_LINUX) == [served]
    sdist = {"filename": "Math_Verify-0.9.0.tar.gz"}
    assert check_pins.installable_files([sdist], "math-verify", "0.9.0", CP311_LINUX) == [sdist]


def test_a_local_cpu_build_is_looked_up_on_pytorchs_index() -> None:
    assert check_pins.index_for("2.13.0+cpu") == "https://download.pytorch.org/whl/cpu"
    assert check_pins.index_for("2.13.0") == check_pins.PYPI
