"""A cluster node as the placement checks see it: its resources, what is free now, and its RAM.

:mod:`placement.cluster` builds the node lists (a running Ray cluster, a declared ``cluster:`` section, this
machine); :mod:`placement.fit` places bundles on them and :mod:`placement.memory_check` compares the memory
estimates with them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The Ray resources the placement checks read (memory in bytes); a node's other custom resources are ignored.
KINDS = ("CPU", "GPU", "TPU", "memory")
# Tolerance when comparing resource amounts: Ray's fractional resources are floats.
EPS = 1e-9


@dataclass(frozen=True)
class NodeView:
    """One node's resources: ``total`` and ``free`` now (Ray resource dicts; memory in bytes), and its RAM in
    bytes when known (``ram_source`` says from where) for the memory check."""

    name: str
    total: dict[str, float]
    free: dict[str, float] = field(default_factory=dict)
    ram_bytes: float | None = None
    ram_source: str = ""
