"""Each role's busy intervals, as ``outputs/<run>/timeline.json`` in Chrome's trace-event format.

The driver records a span per role call (rollout ``generate``, actor_ref ``log_probs``, reward ``grade``,
learner ``update``, the weight loads; the tools role's batches of calls, as the rollout timed them):
``(role, phase, start, end, step)`` in wall-clock seconds. Open the file in https://ui.perfetto.dev or
``chrome://tracing`` to see what overlapped;
:func:`busy_shares` gives the share of the wall time each role was busy (``relay.run.summarize`` plots it).

Worked example: rollout busy [0, 4] and [6, 10], learner [4, 9], over the wall time [0, 10] ->
rollout 0.8, learner 0.5 (the overlap [6, 9] counts for both: that is what a pipeline buys).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relay.role_declarations import track_order

TIMELINE_NAME = "timeline.json"
# The tracks top to bottom: the roles in declaration order, the tools under the rollout that calls them.
ROLE_ORDER = track_order()


@dataclass(frozen=True)
class Span:
    role: str
    phase: str
    start: float
    end: float
    step: int


class Timeline:
    """Spans recorded from any driver thread (the pipeline's collect thread and the main thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.spans: list[Span] = []

    def record(self, role: str, phase: str, start: float, end: float, step: int) -> None:
        with self._lock:
            self.spans.append(Span(role, phase, start, max(start, end), step))

    def snapshot(self) -> list[Span]:
        with self._lock:
            return list(self.spans)

    def write(self, run_dir: Path) -> Path:
        """``run_dir/timeline.json`` (rewritten whole: a crash leaves the last complete one)."""
        path = Path(run_dir) / TIMELINE_NAME
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(chrome_trace(self.snapshot())))
        tmp.replace(path)
        return path


_current: Timeline | None = None


def use(timeline: Timeline | None) -> None:
    """Make ``timeline`` the one :func:`record` writes to (None: recording off)."""
    global _current
    _current = timeline


def record(role: str, phase: str, start: float, end: float, step: int) -> None:
    """Add a span to the current timeline, if one is in use."""
    if _current is not None:
        _current.record(role, phase, start, end, step)


def _role_ids(roles: set[str]) -> dict[str, int]:
    ordered = [r for r in ROLE_ORDER if r in roles] + sorted(roles - set(ROLE_ORDER))
    return {role: i + 1 for i, role in enumerate(ordered)}


def chrome_trace(spans: list[Span]) -> dict[str, Any]:
    """The trace-event JSON: one complete event (``ph: X``, microseconds from the first span) per span, one
    track (``tid``) per role."""
    if not spans:
        return {"traceEvents": [], "displayTimeUnit": "ms"}
    origin = min(s.start for s in spans)
    ids = _role_ids({s.role for s in spans})
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": tid, "args": {"name": role}} for role, tid in ids.items()
    ]
    events += [
        {
            "name": s.phase,
            "cat": s.role,
            "ph": "X",
            "pid": 1,
            "tid": ids[s.role],
            "ts": round((s.start - origin) * 1e6),
            "dur": round((s.end - s.start) * 1e6),
            "args": {"step": s.step},
        }
        for s in sorted(spans, key=lambda s: s.start)
    ]
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def spans_from_trace(trace: dict[str, Any]) -> list[Span]:
    """The spans of a ``timeline.json`` (times in seconds from its first span)."""
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("ph") == "M"}
    return [
        Span(
            names.get(e["tid"], str(e["tid"])), e["name"], e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6, e["args"]["step"]
        )
        for e in trace["traceEvents"]
        if e.get("ph") == "X"
    ]


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, cur_start, cur_end = 0.0, None, None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def busy_shares(spans: list[Span]) -> dict[str, float]:
    """Per role, the share of the wall time (first span's start to last span's end) it was busy; a role's
    overlapping spans count once."""
    if not spans:
        return {}
    wall = max(s.end for s in spans) - min(s.start for s in spans)
    by_role: dict[str, list[tuple[float, float]]] = {}
    for s in spans:
        by_role.setdefault(s.role, []).append((s.start, s.end))
    ordered = _role_ids(set(by_role))
    return {role: _union_length(by_role[role]) / wall if wall > 0 else 0.0 for role in ordered}
