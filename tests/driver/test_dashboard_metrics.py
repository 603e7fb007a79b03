"""The gauges' refresh period follows Ray's report interval; the shipped Grafana dashboard queries only
metrics Relay exports."""

from __future__ import annotations

import json
import re

import pytest

from driver.dashboard_metrics import PUBLISHED, refresh_seconds
from relay.repo import REPO_ROOT

DASHBOARD = REPO_ROOT / "docs" / "grafana" / "relay_dashboard.json"


@pytest.mark.parametrize(
    ("environ", "seconds"),
    [
        ({}, 5.0),
        ({"RAY_metrics_report_interval_ms": "1000"}, 0.5),
        ({"RAY_metrics_report_interval_ms": "100"}, 0.2),
        ({"RAY_metrics_report_interval_ms": "soon"}, 5.0),
    ],
)
def test_refresh_is_half_the_report_interval(environ: dict[str, str], seconds: float) -> None:
    assert refresh_seconds(environ) == seconds


def test_metric_names_are_unique_prometheus_names() -> None:
    names = [name for name, _ in PUBLISHED.values()]
    assert len(names) == len(set(names))
    assert all(name.startswith("relay_") and name.replace("_", "").isalnum() for name in names)


def _exprs(dashboard: dict) -> list[str]:
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    exprs += [v["query"]["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    return exprs


def test_every_grafana_panel_queries_a_metric_relay_exports() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exported = {f"ray_{name}" for name, _ in PUBLISHED.values()}  # Ray prefixes its application metrics
    assert dashboard["panels"] and all(panel["targets"] for panel in dashboard["panels"])
    for expr in _exprs(dashboard):
        names = set(re.findall(r"\bray_relay_\w+", expr))
        assert names and names <= exported, f"{expr!r} queries {sorted(names - exported)}, not exported"
    titles = " ".join(panel["title"].lower() for panel in dashboard["panels"])
    for topic in ("reward", "phase times", "tokens per second", "memory", "weight sync", "log-prob gap", "staleness"):
        assert topic in titles, f"no panel about {topic}"
