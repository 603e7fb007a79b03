"""Shared parts of the A/B scripts (``benchmarks.speed.dynamic_sampling``, ``benchmarks.speed.staleness``): run the
default job with a set of overrides, and print both arms as a Markdown table with their ratio."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from relay.repo import REPO_ROOT


def run_job(overrides: list[str], run_dir: Path) -> tuple[list[dict[str, Any]], float, Any]:
    """The default preset with ``overrides`` trained into ``run_dir`` (Ray initialised); its metric rows,
    wall seconds and config. A failed run raises with its directory."""
    from relay.config import load_config
    from relay.models.paths import resolve_model_path
    from trainer import train

    loaded = load_config(REPO_ROOT / "configs" / "default.yaml", overrides, environ={})
    start = time.perf_counter()
    code = train(loaded, resolve_model_path(loaded.cfg.model.path), run_dir)
    wall = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"run {run_dir.name} failed with exit code {code}; see {run_dir}")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return rows, wall, loaded.cfg


def common_overrides(steps: int, out_dir: Path, name: str) -> list[str]:
    """No checkpoints or validations: the arms differ only in what the script sets."""
    return [
        f"trainer.total_training_steps={steps}",
        f"trainer.output_dir={out_dir}",
        f"trainer.run_name={name}",
        "trainer.save_freq=-1",
        "trainer.save_final=false",
        "trainer.test_freq=-1",
    ]


def ratio_table(
    a: dict[str, Any], b: dict[str, Any], headers: tuple[str, str], rows: Sequence[tuple[str, str, str]]
) -> list[str]:
    """Markdown lines ``| label | a | b | b / a |`` for each ``(label, key, format)``."""
    lines = [f"| | {headers[0]} | {headers[1]} | ratio |", "|---|---:|---:|---:|"]
    for label, key, fmt in rows:
        ratio = b[key] / a[key] if a[key] else float("nan")
        lines.append(f"| {label} | {fmt.format(a[key])} | {fmt.format(b[key])} | {ratio:.2f}× |")
    return lines


def ab_main(
    module: str,
    arms: dict[str, Callable[[int, Path, list[str]], dict[str, Any]]],
    table: Callable[[dict[str, Any]], str],
    result_path: Path,
    default_steps: int,
    argv: list[str] | None,
    description: str | None = None,
) -> int:
    """``--steps`` and ``--set`` parsed, each arm run in turn on one local Ray, the JSON written and the table
    printed."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    parser.add_argument("--steps", type=int, default=default_steps)
    parser.add_argument("--set", dest="extra", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    import ray

    work = Path(tempfile.mkdtemp(prefix=f"relay-{module.rsplit('.', 1)[-1]}-"))
    ray.init()
    try:
        result: dict[str, Any] = {
            "command": " ".join([f"python -m {module}", *(sys.argv[1:] if argv is None else argv)])
        }
        for name, run in arms.items():
            result[name] = run(args.steps, work, args.extra)
    finally:
        ray.shutdown()
    result_path.parent.mkdir(parents=True, exist_ok=True)
    result_path.write_text(json.dumps(result, indent=1))
    print(table(result))
    return 0
