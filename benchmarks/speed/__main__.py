"""``python -m benchmarks.speed``: the group's benchmarks, one line each, with the command that runs it."""

import sys

from benchmarks.harness.listing import main

sys.exit(main("benchmarks.speed"))
