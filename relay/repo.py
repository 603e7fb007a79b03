"""Where the repository is: the one place that knows the checkout's layout (``configs/``, ``data/``, ``docs/``).

Relay is installed in editable mode from its checkout (``scripts/setup.sh``), and ``ray job submit`` uploads the
checkout as the job's working directory, so this file's parent's parent is the checkout in both cases.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIGS_DIR = REPO_ROOT / "configs"
DEFAULT_PRESET = CONFIGS_DIR / "default.yaml"

RELAY_HOME_ENV = "RELAY_HOME"


# The JAX persistent compilation cache's bound ($RELAY_HOME/jax-cache): least recently used entries go first.
JAX_CACHE_MAX_BYTES = 4 * 1024**3


def relay_home(environ: Mapping[str, str] | None = None) -> Path:
    """Relay's own directory outside the checkout: ``$RELAY_HOME``, default ``~/.cache/relay``. It holds the
    converted models (``models/``), the JAX compilation cache (``jax-cache/``), the prompt cache (``prompt-cache/``)
    and a submitted job's outputs when its submit directory is not on the driver's node (``outputs/``)."""
    environ = os.environ if environ is None else environ
    return Path(environ.get(RELAY_HOME_ENV) or Path.home() / ".cache" / "relay").expanduser()
