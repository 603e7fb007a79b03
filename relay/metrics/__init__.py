"""Every metric key Relay writes, declared once with its unit, meaning and producer (:mod:`relay.metrics.catalog`).

Code that writes a metric takes its name from here (``from relay.metrics import system as sm``;
``metrics[sm.TIMING_STEP] = seconds``); the console table, the run summary, the gauges and ``docs/monitoring.md``'s
reference read the same entries.
"""

from relay.metrics import outcomes, policy, system, validation  # noqa: F401  (each module declares its family)
from relay.metrics.catalog import CATALOG, Metric, lookup

__all__ = ["CATALOG", "Metric", "lookup"]
