"""What the terminal shows in the quiet default: a short header, and a failed role's last log lines.

Everything else a library prints goes to ``outputs/<run>/logs/`` (``relay.run.logs``); ``--verbose`` keeps it all
on the terminal.
"""

from __future__ import annotations

import sys
from pathlib import Path

from relay.run.logs import LOGS_DIR, role_log_path, tail

FAILED_ROLE_LINES = 30


def header_lines(run_dir: Path, model_path: Path, dashboard_url: str | None, quiet: bool) -> list[str]:
    """The lines printed before the roles start.

    >>> header_lines(Path("outputs/r"), Path("/m"), "127.0.0.1:8265", True)
    ['run: outputs/r (logs: outputs/r/logs/; --verbose shows them here)', 'model: /m', 'dashboard: http://127.0.0.1:8265']
    """
    logs = f" (logs: {run_dir / LOGS_DIR}/; --verbose shows them here)" if quiet else ""
    lines = [f"run: {run_dir}{logs}", f"model: {model_path}"]
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
