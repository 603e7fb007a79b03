"""The metric catalog's machinery: a :class:`Metric` (name, unit, meaning, producer), :func:`declare` that registers
one and returns its name for the code that writes it, and :func:`lookup` that finds the entry of a written key.

A name may be a template with ``{field}`` parts: one entry for a family of keys, e.g. ``memory/{role}_peak_rss_gib``
for ``memory/rollout_peak_rss_gib`` and ``memory/learner_peak_rss_gib``; the code writes
``MEMORY_PEAK_RSS.format(role=role)``. A ``{field}`` matches one path segment's text (no ``/``), except
``{subset}``, which is a whole path segment of validation's per-subset figures.

Worked example: ``declare("timing/step", "s", "the step's wall-clock seconds", "driver")`` returns
``"timing/step"``; ``lookup("timing/step").unit == "s"``; ``lookup("memory/tools_peak_rss_gib").name ==
"memory/{role}_peak_rss_gib"``; ``lookup("made/up") is None``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

UNITS = ("s", "GiB", "bytes", "tokens", "tokens/s", "items/s", "share", "count", "score", "nats", "steps", "index")


@dataclass(frozen=True)
class Metric:
    """One metric key (or a template of keys) Relay writes to ``metrics.jsonl``, TensorBoard and the gauges."""

    name: str
    unit: str  # one of UNITS: "share" is a fraction in [0, 1], "score" is the reward's own scale
    meaning: str  # one line: what the value is, over which rows or which time
    producer: str  # the role or driver phase that computes it
    machine: bool = False  # a figure of the process or machine (whatever the unit): not in the run's digest

    @property
    def family(self) -> str:
        """The key's first path segment (``timing``, ``val``, ...): the catalog's sections."""
        return self.name.split("/", 1)[0]


CATALOG: dict[str, Metric] = {}


def declare(name: str, unit: str, meaning: str, producer: str, machine: bool = False) -> str:
    """Register the metric ``name`` and return it (``machine``: it describes the process or machine, not what the
    run computed, see :attr:`Metric.machine`). ValueError on a second declaration or an unknown unit."""
    if name in CATALOG:
        raise ValueError(f"metric {name!r} is declared twice")
    if unit not in UNITS:
        raise ValueError(f"metric {name!r}: unit {unit!r} is not one of {UNITS}")
    CATALOG[name] = Metric(name, unit, meaning, producer, machine)
    _patterns.cache_clear()
    return name


@cache
def _patterns() -> list[tuple[re.Pattern[str], Metric]]:
    out = []
    for metric in CATALOG.values():
        if "{" in metric.name:
            parts = re.split(r"(\{\w+\})", metric.name)
            regex = "".join(
                "[^/]+" if p == "{subset}" else r"[^/]+?" if p.startswith("{") else re.escape(p) for p in parts
            )
            out.append((re.compile(regex + r"\Z"), metric))
    return out


def family_prefix(family: str) -> str:
    """``"<family>/"``, the prefix of every key of a declared family (for code that selects a whole family, e.g.
    ``key.startswith(family_prefix("timing"))``). ValueError when no declared key has that family."""
    prefix = f"{family}/"
    if not any(name.startswith(prefix) for name in CATALOG):
        raise ValueError(f"no metric of the family {family!r} is declared")
    return prefix


def lookup(key: str) -> Metric | None:
    """The catalog entry of a written key: its own, else the template it fits (the first declared), else None."""
    if key in CATALOG:
        return CATALOG[key]
    return next((metric for pattern, metric in _patterns() if pattern.match(key)), None)
