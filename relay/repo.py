"""Where the repository is: the one place that knows the checkout's layout (``configs/``, ``data/``, ``docs/``).

Relay is installed in editable mode from its checkout (``scripts/setup.sh``), and ``ray job submit`` uploads the
checkout as the job's working directory, so this file's parent's parent is the checkout in both cases.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIGS_DIR = REPO_ROOT / "configs"
DEFAULT_PRESET = CONFIGS_DIR / "default.yaml"
