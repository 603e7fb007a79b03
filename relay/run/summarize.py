"""Summarize a run directory: a Markdown table per step, the run's events, and PNG plots.

Usage::

    python -m relay.run.summarize outputs/<run name> [--out DIR]

Prints Markdown to stdout (pipe it into a file or a PR) and writes ``reward.png``, ``accuracy.png``,
``kl.png``, ``response_length.png``, ``step_time_breakdown.png`` and, from ``timeline.json``,
``timeline.png`` (each role's busy spans and share of the wall time) into ``RUN_DIR/plots/`` (or
``--out``). A metric the run did not record shows ``-`` in the table and its plot is skipped with a note.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relay.metrics import outcomes as om
from relay.metrics import policy as pm
from relay.metrics import system as sm
from relay.metrics.columns import summary_columns
from relay.run.events import read_events
from relay.run.jsonsafe import finite_number
from relay.run.sinks import METRICS_NAME
from relay.run.timeline import TIMELINE_NAME, Span, busy_shares, spans_from_trace

# (column header, metric key, format): the run summary's side of relay.metrics.columns
SUMMARY_COLUMNS: tuple[tuple[str, str, str], ...] = tuple(
    (column.summary[1], column.key, column.summary_format()) for column in summary_columns()
)

# Phases of a step in the order they run, and the plot label of each.
PHASES: tuple[tuple[str, str], ...] = (
    (sm.TIMING_ROLLOUT, "rollout"),
    (sm.TIMING_ACTOR_REF_AND_REWARD, "actor_ref + reward"),
    (sm.TIMING_UPDATE, "update"),
    (sm.TIMING_SYNC, "sync"),
)
STEP_TIME = sm.TIMING_STEP

# File name, title, y label, metric key.
LINE_PLOTS: tuple[tuple[str, str, str, str], ...] = (
    ("reward.png", "Reward (mean over responses)", "reward", om.REWARD_MEAN),
    ("accuracy.png", "Accuracy", "accuracy", om.REWARD_ACCURACY),
    ("kl.png", "KL to the reference policy", "KL", pm.ACTOR_KL),
    ("response_length.png", "Response length (mean tokens)", "tokens", om.RESPONSE_LENGTH_MEAN),
)
# Drawn as a band around the line when recorded.
STD_KEYS: dict[str, str] = {om.REWARD_MEAN: om.REWARD_STD}


@dataclass
class Plots:
    written: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def load_metrics(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``metrics.jsonl``, one per step in step order.

    Unparseable lines (a run killed mid-write) are skipped; a step written twice (a resumed run redoing
    steps after its checkpoint) keeps its last row; a row without ``"step"`` gets its line index.
    """
    by_step: dict[int, dict[str, Any]] = {}
    for index, line in enumerate(Path(path).read_text().splitlines()):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(row, dict):
            continue
        try:
            step = int(row.get(sm.STEP, index))
        except (TypeError, ValueError):
            step = index
        row[sm.STEP] = step
        by_step[step] = row
    return [by_step[s] for s in sorted(by_step)]


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """One Markdown row per step with ``SUMMARY_COLUMNS``; a missing value is ``-``.

    >>> print(markdown_table([{"step": 0, "reward/mean": 0.25}]).splitlines()[2])
    | 0 | 0.250 | - | - | - | - | - | - | - | - |
    """
    header = "| " + " | ".join(name for name, _, _ in SUMMARY_COLUMNS) + " |"
    align = "|" + "|".join("---:" for _ in SUMMARY_COLUMNS) + "|"
    lines = [header, align]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row.get(key), fmt) for _, key, fmt in SUMMARY_COLUMNS) + " |")
    return "\n".join(lines)


def time_totals(rows: Sequence[dict[str, Any]]) -> str | None:
    """A one-table breakdown of the run's total step time per phase, or None without ``timing/step``."""
    total = sum(v for r in rows if (v := finite_number(r.get(STEP_TIME))) is not None)
    if total <= 0:
        return None
    lines = ["| phase | seconds | share |", "|---|---:|---:|"]
    accounted = 0.0
    for key, label in PHASES:
        seconds = sum(v for r in rows if (v := finite_number(r.get(key))) is not None)
        accounted += seconds
        lines.append(f"| {label} | {seconds:.1f} | {100 * seconds / total:.0f}% |")
    other = max(total - accounted, 0.0)
    lines.append(f"| other | {other:.1f} | {100 * other / total:.0f}% |")
    lines.append(f"| **step total** | {total:.1f} | 100% |")
    return "\n".join(lines)


def events_list(events: Sequence[dict[str, Any]]) -> str:
    """One Markdown bullet per event: ``- time **kind** key=value ...``."""
    lines = []
    for e in events:
        extra = " ".join(f"{k}={_short(v)}" for k, v in e.items() if k not in {"time", "event"})
        lines.append(f"- {e.get('time', '?')} **{e.get('event', '?')}** {extra}".rstrip())
    return "\n".join(lines)


def write_plots(rows: Sequence[dict[str, Any]], out_dir: Path) -> Plots:
    """Write the PNG plots into ``out_dir`` (created); a plot whose metric was never recorded is skipped
    with a note. Uses matplotlib's object API with the Agg canvas: no pyplot, no global backend change."""
    plots = Plots()
    if not rows:
        plots.notes.append("no steps in metrics.jsonl: no plots")
        return plots
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, title, ylabel, key in LINE_PLOTS:
        points = _series(rows, key)
        if not points:
            plots.notes.append(f"{name} skipped: no {key} in metrics.jsonl")
            continue
        plots.written.append(_line_plot(out_dir / name, title, ylabel, key, points, _series(rows, STD_KEYS.get(key))))
    timing_keys = (STEP_TIME, *(key for key, _ in PHASES))
    if any(finite_number(r.get(key)) is not None for r in rows for key in timing_keys):
        plots.written.append(_breakdown_plot(out_dir / "step_time_breakdown.png", rows))
    else:
        plots.notes.append(f"step_time_breakdown.png skipped: no {STEP_TIME} or phase timings in metrics.jsonl")
    return plots


def utilisation_table(spans: Sequence[Span]) -> str | None:
    """Each role's busy time and share of the wall time (``timeline.json``), or None without spans."""
    shares = busy_shares(list(spans))
    if not shares:
        return None
    wall = max(sp.end for sp in spans) - min(sp.start for sp in spans)
    lines = [f"Wall time covered: {wall:.1f} s", "", "| role | busy (s) | share of wall time |", "|---|---:|---:|"]
    lines += [f"| {role} | {share * wall:.1f} | {100 * share:.0f}% |" for role, share in shares.items()]
    return "\n".join(lines)


def _timeline_plot(path: Path, spans: Sequence[Span]) -> Path:
    """One row per role, a bar per busy span, the busy share in the row label."""
    shares = busy_shares(list(spans))
    origin = min(sp.start for sp in spans)
    fig, ax = _figure("Who was busy when (timeline.json)", "seconds since the first call", "", width=10)
    roles = list(shares)
    for row, role in enumerate(roles):
        bars = [(sp.start - origin, sp.end - sp.start) for sp in spans if sp.role == role]
        ax.broken_barh(bars, (row - 0.35, 0.7), color=f"C{row}")
    ax.set_yticks(range(len(roles)))
    ax.set_yticklabels([f"{role} ({100 * shares[role]:.0f}% busy)" for role in roles])
    ax.invert_yaxis()
    return _save(fig, path)


def summarize(run_dir: Path, out_dir: Path | None = None) -> tuple[str, Plots]:
    """The Markdown summary of a run directory and the plots written (``run_dir/plots`` by default)."""
    run_dir = Path(run_dir)
    rows = load_metrics(run_dir / METRICS_NAME)
    events = read_events(run_dir)
    plot_dir = Path(out_dir) if out_dir is not None else run_dir / "plots"
    plots = write_plots(rows, plot_dir)
    trace = run_dir / TIMELINE_NAME
    spans = spans_from_trace(json.loads(trace.read_text())) if trace.is_file() else []
    if spans:
        plots.written.append(_timeline_plot(plot_dir / "timeline.png", spans))
    else:
        plots.notes.append(f"timeline.png skipped: no {TIMELINE_NAME} in the run directory")
    parts = [f"# Run {run_dir.name}", "", f"{len(rows)} steps in {run_dir / METRICS_NAME}", "", markdown_table(rows)]
    totals = time_totals(rows)
    if totals:
        parts += ["", "## Time per phase (all steps)", "", totals]
    busy = utilisation_table(spans)
    if busy:
        parts += ["", "## Role utilisation (timeline.json)", "", busy]
    if events:
        parts += ["", "## Events", "", events_list(events)]
    parts += ["", "## Plots", ""]
    parts += [f"- {p}" for p in plots.written] + [f"- {note}" for note in plots.notes]
    return "\n".join(parts) + "\n", plots


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m relay.run.summarize",
        description="Print a Markdown table of a run's steps and write PNG plots of its metrics.",
    )
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory, e.g. outputs/<run name>")
    parser.add_argument("--out", type=Path, default=None, help="where to write the plots (default RUN_DIR/plots)")
    args = parser.parse_args(argv)
    metrics = args.run_dir / METRICS_NAME
    if not metrics.is_file():
        print(f"error: {metrics} not found: pass a run directory (outputs/<run name>)", file=sys.stderr)
        return 2
    text, _ = summarize(args.run_dir, args.out)
    sys.stdout.write(text)
    return 0


# --- helpers ------------------------------------------------------------------------------------------------


def _cell(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    try:
        return fmt.format(value)
    except (TypeError, ValueError):
        return str(value)


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _series(rows: Sequence[dict[str, Any]], key: str | None) -> list[tuple[int, float]]:
    if key is None:
        return []
    return [(r[sm.STEP], v) for r in rows if (v := finite_number(r.get(key))) is not None]


def _figure(title: str, xlabel: str, ylabel: str, width: float = 7):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, 4), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _save(fig, path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.savefig(path, format="png")
    return path


def _line_plot(
    path: Path,
    title: str,
    ylabel: str,
    key: str,
    points: list[tuple[int, float]],
    std: list[tuple[int, float]],
) -> Path:
    fig, ax = _figure(title, "step", ylabel)
    steps = [s for s, _ in points]
    values = [v for _, v in points]
    ax.plot(steps, values, marker="o", markersize=3, label=key)
    spread = dict(std)
    if spread:
        band = [(s, v - spread[s], v + spread[s]) for s, v in points if s in spread]
        ax.fill_between([b[0] for b in band], [b[1] for b in band], [b[2] for b in band], alpha=0.2, label="± std")
        ax.legend()
    if len(set(steps)) == 1:
        ax.set_xticks(steps)
    return _save(fig, path)


def _breakdown_plot(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    fig, ax = _figure("Step time by phase", "step", "seconds", width=9)
    steps = [r[sm.STEP] for r in rows]
    bottom = [0.0] * len(rows)
    for key, label in PHASES:
        heights = [finite_number(r.get(key)) or 0.0 for r in rows]
        if any(heights):
            ax.bar(steps, heights, bottom=bottom, label=label)
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    other = [max((finite_number(r.get(STEP_TIME)) or b) - b, 0.0) for r, b in zip(rows, bottom, strict=True)]
    if any(other):
        ax.bar(steps, other, bottom=bottom, label="rest of timing/step", color="lightgray")
    handles, labels = ax.get_legend_handles_labels()  # top of the stack first, beside the bars
    ax.legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    if len(steps) <= 30:
        ax.set_xticks(steps)
    return _save(fig, path)


if __name__ == "__main__":
    sys.exit(main())
