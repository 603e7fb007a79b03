"""The monitoring chain on a live job: Prometheus scraping a Ray head, Relay's series queried over the run, and
the dashboard's Jobs and Actors pages captured with headless Chromium.

    python -m benchmarks.speed.monitoring [--steps 8] [--scrape-s 2] [--out outputs/monitoring] [--no-write]

Needs Debian's ``prometheus`` and ``chromium`` packages (``apt-get install prometheus chromium``); exits 2 naming
what is missing. It starts an isolated head (its own ports; Ray's default 10 s metrics report window; token
authentication off so the headless browser sees the pages, not the token prompt), a Prometheus that scrapes Ray's
service-discovery file every ``--scrape-s`` seconds, and submits ``configs/tiny.yaml`` for ``--steps`` steps
through ``submit.py``. While the job runs it captures ``#/jobs`` and ``#/actors``; afterwards it asks
Prometheus for ``ray_relay_step`` and the phase times over the run (``query_range``) and writes:

* ``docs/monitoring_prometheus.png``: the queried series against time;
* ``docs/dashboard_jobs.png``, ``docs/dashboard_actors.png``: the screenshots;
* ``benchmarks/results/monitoring.json``: how many scrapes had Relay's series between the first and last step.

``--no-write`` keeps everything in ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.harness.ray_head import free_port, isolated_head, reachable, submit_job
from relay.repo import REPO_ROOT

PHASES = ("rollout", "actor_ref_and_reward", "update", "sync")


def prometheus_config(ray_temp_dir: Path, scrape_s: float) -> str:
    """A Prometheus configuration that scrapes every node listed in Ray's service-discovery file (Ray writes it
    in its ``--temp-dir``, ``/tmp/ray`` by default). Durations in whole milliseconds: Prometheus refuses "2.0s"."""
    interval = f"{round(scrape_s * 1000)}ms"
    return (
        f"global:\n  scrape_interval: {interval}\n  evaluation_interval: {interval}\n"
        "scrape_configs:\n  - job_name: ray\n    file_sd_configs:\n"
        f"      - files: ['{ray_temp_dir / 'prom_metrics_service_discovery.json'}']\n"
    )


def query_range(prom: str, query: str, start: float, end: float, step_s: float) -> list[tuple[float, float]]:
    """``[(unix time, value)]`` of the first series Prometheus returns for ``query`` (empty when none)."""
    params = urllib.parse.urlencode({"query": query, "start": start, "end": end, "step": step_s})
    with urllib.request.urlopen(f"{prom}/api/v1/query_range?{params}", timeout=10) as reply:  # noqa: S310 - local
        result = json.loads(reply.read())["data"]["result"]
    return [(float(t), float(v)) for t, v in result[0]["values"]] if result else []


def screenshot(chromium: str, url: str, path: Path) -> bool:
    """A headless Chromium capture of ``url`` (the dashboard is a single-page app: give it 15 s of virtual time)."""
    cmd = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1600,900"]
    cmd += ["--virtual-time-budget=15000", f"--screenshot={path}", url]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    return out.returncode == 0 and path.is_file()


def plot(series: dict[str, list[tuple[float, float]]], t0: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    steps = series["ray_relay_step"]
    top.step([t - t0 for t, _ in steps], [v for _, v in steps], where="post", marker=".", ms=3)
    top.set_ylabel("ray_relay_step")
    top.set_title("Prometheus query_range over a submitted tiny run (one point per query step)")
    for phase in PHASES:
        points = series[f"ray_relay_{phase}_seconds"]
        bottom.plot([t - t0 for t, _ in points], [v for _, v in points], ".", ms=3, label=phase)
    bottom.set_ylabel("seconds (last step)")
    bottom.set_xlabel("seconds since the job was submitted")
    bottom.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Submit a tiny run to an isolated head scraped by Prometheus, query Relay's series over the run, and write
    the figure, the screenshots and the summary (into ``args.out``, and into the repository unless ``--no-write``);
    returns the summary."""
    from relay.models.tiny import build_tiny_llama

    missing = [name for name in ("prometheus", "chromium") if shutil.which(name) is None]
    if missing:
        raise SystemExit(
            f"benchmarks.speed.monitoring needs {' and '.join(missing)}: apt-get install {' '.join(missing)}"
        )
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    model = build_tiny_llama(out / "tiny-model")
    name = f"monitoring-{time.strftime('%Y%m%d-%H%M%S')}"
    relative_out = f"outputs/monitoring-runs-{name}"
    with isolated_head(env={"RAY_AUTH_MODE": "disabled"}) as head:
        try:
            with _prometheus(out, head.temp_dir, args.scrape_s) as prom_url:
                cmd = _job_command(head.url, name, model, args.steps, relative_out)
                submitted, finished, shots = _run_job(head, cmd, out)
                time.sleep(2 * args.scrape_s)  # the last scrape lands
                series = _query_series(prom_url, name, submitted, finished, args.scrape_s)
        finally:
            shutil.rmtree(REPO_ROOT / relative_out, ignore_errors=True)
    summary = _summary(name, args, series, finished - submitted, shots)
    plot(series, submitted, out / "monitoring_prometheus.png")
    (out / "monitoring.json").write_text(json.dumps({"summary": summary, "series": series}, indent=1))
    if not args.no_write:
        _write_to_repository(out, summary, shots)
    return summary


@contextlib.contextmanager
def _prometheus(out: Path, ray_temp_dir: Path, scrape_s: float) -> Iterator[str]:
    """A Prometheus scraping the Ray head whose ``--temp-dir`` is ``ray_temp_dir``, its configuration, data and
    log in ``out``; yields its URL once it is ready and stops it on exit."""
    prom_port = free_port()
    prom_url = f"http://127.0.0.1:{prom_port}"
    (out / "prometheus.yml").write_text(prometheus_config(ray_temp_dir, scrape_s))
    prom = subprocess.Popen(
        ["prometheus", f"--config.file={out / 'prometheus.yml'}", f"--web.listen-address=127.0.0.1:{prom_port}"]
        + [f"--storage.tsdb.path={out / 'prometheus-data'}"],
        stdout=(out / "prometheus.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not reachable(f"{prom_url}/-/ready"):
            if prom.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"prometheus did not start; see {out / 'prometheus.log'}")
            time.sleep(0.5)
        yield prom_url
    finally:
        prom.terminate()
        prom.wait(timeout=30)


def _job_command(head_url: str, name: str, model: Path, steps: int, relative_out: str) -> list[str]:
    """``submit.py`` submitting ``configs/tiny.yaml`` on ``model`` for ``steps`` steps as job ``name``."""
    cmd = [sys.executable, "submit.py", "--address", head_url, "--name", name, "--"]
    cmd += [sys.executable, "trainer.py", "--config", "configs/tiny.yaml", "--set", f"model.path={model}"]
    cmd += ["--set", "rollout.engine=hf", "--set", f"trainer.total_training_steps={steps}"]
    cmd += ["--set", f"trainer.output_dir={relative_out}"]
    return cmd


def _run_job(head: Any, cmd: list[str], out: Path) -> tuple[float, float, list[str]]:
    """Submit ``cmd`` and capture the dashboard while it runs; returns when it was submitted and finished (unix
    time) and the screenshots taken. Writes the job's log to ``out/job.log``; exits when the job failed."""
    submitted = time.time()
    result: dict[str, Any] = {}
    job = threading.Thread(target=lambda: result.update(done=submit_job(head, cmd, REPO_ROOT)), daemon=True)
    job.start()
    shots = _capture_while_running(head, job, out)
    job.join()
    finished = time.time()
    done = result["done"]
    (out / "job.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"the job failed; its log is {out / 'job.log'}")
    return submitted, finished, shots


def _query_series(
    prom_url: str, name: str, start: float, end: float, step_s: float
) -> dict[str, list[tuple[float, float]]]:
    """Run ``name``'s step gauge and phase times between ``start`` and ``end``, one point every ``step_s``."""
    queries = ["ray_relay_step", *(f"ray_relay_{p}_seconds" for p in PHASES)]
    return {q: query_range(prom_url, f'{q}{{run="{name}"}}', start, end, step_s) for q in queries}


def _summary(
    name: str, args: argparse.Namespace, series: dict[str, list[tuple[float, float]]], job_s: float, shots: list[str]
) -> dict[str, Any]:
    """How many step-gauge points Prometheus had against how many scrapes fit between the first and the last."""
    steps = series["ray_relay_step"]
    first = min((t for t, v in steps), default=None)
    last = max((t for t, v in steps), default=None)
    expected = int((last - first) / args.scrape_s) + 1 if steps else 0
    return {
        "run": name,
        "steps": args.steps,
        "scrape_s": args.scrape_s,
        "job_seconds": job_s,
        "step_points": len(steps),
        "step_points_expected_between_first_and_last": expected,
        "last_step_value": steps[-1][1] if steps else None,
        "screenshots": shots,
    }


def _write_to_repository(out: Path, summary: dict[str, Any], shots: list[str]) -> None:
    """Copy the figure and screenshots from ``out`` into ``docs/`` and the summary into ``benchmarks/results/``."""
    shutil.copy(out / "monitoring_prometheus.png", REPO_ROOT / "docs" / "monitoring_prometheus.png")
    for shot in shots:
        shutil.copy(out / shot, REPO_ROOT / "docs" / shot)
    (REPO_ROOT / "benchmarks" / "results" / "monitoring.json").write_text(json.dumps(summary, indent=1) + "\n")


def _capture_while_running(head: Any, job: threading.Thread, out: Path) -> list[str]:
    """Once the run's first step is on the metrics port, capture the Jobs and Actors pages (actors alive)."""
    chromium = shutil.which("chromium")
    while job.is_alive():
        try:
            text = urllib.request.urlopen(head.metrics_url, timeout=2).read().decode()  # noqa: S310 - local
        except OSError:
            text = ""
        if "ray_relay_step{" in text:
            break
        time.sleep(1)
    shots = []
    for page in ("jobs", "actors"):
        if job.is_alive() and screenshot(chromium, f"{head.url}/#/{page}", out / f"dashboard_{page}.png"):
            shots.append(f"dashboard_{page}.png")
    return shots


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--scrape-s", type=float, default=2.0)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "outputs" / "monitoring")
    parser.add_argument("--no-write", action="store_true")
    summary = run(parser.parse_args())
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
