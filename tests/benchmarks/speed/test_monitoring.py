"""The monitoring chain on a live job: Prometheus finds Relay's series over the whole run.

The live run is slow (a head, a Prometheus and a 6-step tiny job: ~2 min), and only where Debian's ``prometheus`` and
``chromium`` are installed; ``python -m benchmarks.speed.monitoring`` is the same run writing the docs' figures.
"""

from __future__ import annotations

import argparse
import shutil

import pytest

from benchmarks.speed.monitoring import prometheus_config, run


def test_prometheus_config_scrapes_rays_service_discovery_file(tmp_path) -> None:
    text = prometheus_config(tmp_path, 2.0)
    assert f"- files: ['{tmp_path / 'prom_metrics_service_discovery.json'}']" in text
    assert "scrape_interval: 2000ms" in text  # Prometheus refuses "2.0s" and "0.5s"
    assert "scrape_interval: 500ms" in prometheus_config(tmp_path, 0.5)


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("prometheus") is None or shutil.which("chromium") is None,
    reason="needs Debian's prometheus and chromium packages",
)
def test_prometheus_has_relays_series_through_the_run(tmp_path) -> None:
    summary = run(argparse.Namespace(steps=6, scrape_s=2.0, out=tmp_path, no_write=True))
    assert summary["last_step_value"] == 5  # the step gauge reached the last step
    # a point for (nearly) every query step between the first and the last: no gaps between steps
    assert summary["step_points"] >= 0.9 * summary["step_points_expected_between_first_and_last"], summary
    assert set(summary["screenshots"]) == {"dashboard_jobs.png", "dashboard_actors.png"}
