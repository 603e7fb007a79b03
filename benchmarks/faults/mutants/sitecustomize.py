"""Arms a campaign run's process with a known-bad recovery (:mod:`benchmarks.faults.mutations`); a no-op elsewhere.

Python imports ``sitecustomize`` at start-up from ``sys.path``; :mod:`benchmarks.faults.chaos` puts this directory on
``PYTHONPATH`` only for a mutation campaign's Ray head and trainer runs.
"""

import os

if os.environ.get("RELAY_FAULT"):
    from benchmarks.faults.mutations import install

    install()
