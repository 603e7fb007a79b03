"""What the terminal shows in the quiet default: a short header, one table row per step, and a failed role's last log
lines.

Everything else a library prints goes to ``outputs/<run>/logs/`` (``relay.run.logs``); ``--verbose`` keeps it all
on the terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from relay.metrics import columns as mc
from relay.metrics import outcomes as om
from relay.metrics import system as sm
from relay.run.logs import LOGS_DIR, role_log_path, tail

FAILED_ROLE_LINES = 30

# (column header, metric key, format): the terminal's side of relay.metrics.columns
Column = tuple[str, str, str]
Columns = tuple[Column, ...]


def console_column(column: mc.Column) -> Column:
    """A column of :mod:`relay.metrics.columns` as the terminal's (header, key, right-aligned format)."""
    return column.header, column.key, column.console_format()


TABLE_COLUMNS: Columns = tuple(map(console_column, mc.STEP_COLUMNS))
# Multi-turn runs (rollout.agent.enable) add one column after resp_len: tool calls per response.
AGENT_COLUMN = console_column(mc.AGENT_COLUMN)
# A curriculum (data.curriculum) adds the level the step trained on after acc (0 the easiest).
LEVEL_COLUMN = console_column(mc.LEVEL_COLUMN)
# A warm start's table (sft.enable): the training and validation loss, the update's time and throughput.
SFT_COLUMNS: Columns = tuple(map(console_column, mc.SFT_COLUMNS))


def table_columns(agent: bool, sft: bool = False, curriculum: bool = False) -> Columns:
    """The step table's columns: :data:`TABLE_COLUMNS`, with :data:`AGENT_COLUMN` for a multi-turn run and
    :data:`LEVEL_COLUMN` for a curriculum; :data:`SFT_COLUMNS` for a warm start."""
    if sft:
        return SFT_COLUMNS
    columns = TABLE_COLUMNS
    if agent:
        at = [key for _, key, _ in columns].index(om.RESPONSE_LENGTH_MEAN) + 1
        columns = (*columns[:at], AGENT_COLUMN, *columns[at:])
    if curriculum:
        at = [key for _, key, _ in columns].index(om.REWARD_ACCURACY) + 1
        columns = (*columns[:at], LEVEL_COLUMN, *columns[at:])
    return columns


def table_header(columns: Columns = TABLE_COLUMNS) -> str:
    """The step table's header line (a column is as wide as its header or its numbers, whichever is wider)."""
    return " ".join(_width(fmt, name).format(name) for name, _, fmt in columns)


def table_row(metrics: dict[str, Any], columns: Columns = TABLE_COLUMNS) -> str:
    """One step's line under :func:`table_header`; a metric the step lacks shows ``-``."""
    cells = []
    for name, key, fmt in columns:
        value = metrics.get(key)
        cells.append(fmt.format(value) if value is not None else _width(fmt, name).format("-"))
    return " ".join(cells)


def _width(fmt: str, name: str) -> str:
    digits = "".join(ch for ch in fmt.split(":")[1] if ch.isdigit() or ch == ".").split(".")[0]
    return "{:>" + str(max(int(digits or 0), len(name))) + "}"


def header_lines(
    run_dir: Path, model_path: Path, dashboard_url: str | None, quiet: bool, env_overrides: Sequence[str] = ()
) -> list[str]:
    """The lines printed before the roles start; ``env_overrides`` are the environment variables applied to the
    config, described (``relay.config.sources.EnvOverride.describe``).

    >>> header_lines(Path("outputs/r"), Path("/m"), "127.0.0.1:8265", True)
    ['run: outputs/r (logs: outputs/r/logs/; --verbose shows them here)', 'model: /m', 'dashboard: http://127.0.0.1:8265']
    >>> header_lines(Path("r"), Path("/m"), None, False, ["STEPS=5 -> trainer.total_training_steps"])
    ['run: r', 'model: /m', 'environment overrides: STEPS=5 -> trainer.total_training_steps']
    """
    logs = f" (logs: {run_dir / LOGS_DIR}/; --verbose shows them here)" if quiet else ""
    lines = [f"run: {run_dir}{logs}", f"model: {model_path}"]
    if env_overrides:
        lines.append(f"environment overrides: {', '.join(env_overrides)}")
    if dashboard_url:
        url = dashboard_url if "://" in dashboard_url else f"http://{dashboard_url}"
        lines.append(f"dashboard: {url}")
    return lines


def print_role_log_tail(run_dir: Path, actor: str, lines: int = FAILED_ROLE_LINES) -> None:
    """The last ``lines`` lines of the failed actor's log (quiet mode), so the terminal says why it died."""
    path = role_log_path(run_dir, actor)
    last = tail(path, lines)
    if not last:
        return
    print(f"--- last {len(last)} lines of {path} ---", file=sys.stderr)
    for line in last:
        print(f"  {line}", file=sys.stderr)
    print("---", file=sys.stderr)


def memory_lines(role: str, oom: bool, last_metrics: dict[str, float] | None, node_total_gib: float) -> list[str]:
    """What the terminal says about memory when ``role`` died: its last measured peak (per-step
    ``memory/<role>_peak_rss_gib``) against the node's, the roles' sum, and, when Ray killed it for memory, what
    to change.

    >>> last = {"step": 3, "memory/learner_peak_rss_gib": 11.6, "memory/roles_peak_rss_gib": 18.5}
    >>> print(memory_lines("learner", False, last, 23.5)[0])
    learner peak memory 11.6 GiB at step 3 (roles summed 18.5 GiB) of this node's 23.5 GiB
    >>> print(memory_lines("rollout", False, None, 23.5)[0])
    rollout memory: not measured yet (it died before its first step ended); this node has 23.5 GiB
    """
    m = last_metrics or {}
    peak = m.get(sm.MEMORY_PEAK_RSS.format(role=role))
    if peak is None:
        lines = [
            f"{role} memory: not measured yet (it died before its first step ended); "
            f"this node has {node_total_gib:.1f} GiB"
        ]
    else:
        summed = m.get(sm.MEMORY_ROLES_PEAK)
        roles = f" (roles summed {summed:.1f} GiB)" if summed is not None else ""
        lines = [
            f"{role} peak memory {peak:.1f} GiB at step {int(m.get(sm.STEP, -1))}{roles} of this node's "
            f"{node_total_gib:.1f} GiB"
        ]
    if oom:
        lines.append(
            "what to change: run one job per node, or make the roles smaller (docs/cluster.md, 'Memory per role', "
            "shows how to read each preset's); Ray's memory monitor kills above RAY_memory_usage_threshold "
            "(default 0.95)"
        )
    return lines
