"""Command-line pieces shared by the benchmark scripts."""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from relay.repo import REPO_ROOT


def section_parser(description: str) -> argparse.ArgumentParser:
    """The command line of a benchmark that measures one model and writes a BENCHMARKS.md section:
    ``--model`` and ``--no-write``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", default="smollm2-135m", help="model.path: a prepared name or an HF directory")
    parser.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md and results/ alone")
    return parser


def add_int_options(parser: argparse.ArgumentParser, **defaults: int) -> None:
    """An integer option per keyword, with that default: ``max_new_tokens=128`` adds ``--max-new-tokens``."""
    for name, default in defaults.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)


def add_held_out_options(parser: argparse.ArgumentParser, out_name: str) -> None:
    """The options of a benchmark that trains and evaluates on the preset's held-out problems in phases cached in a
    folder: ``--problems``, ``--out`` (default ``outputs/<out_name>``), ``--fresh`` and ``--no-write``."""
    parser.add_argument("--problems", type=int, default=200, help="held-out problems (the first N of the test split)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "outputs" / out_name)
    parser.add_argument("--fresh", action="store_true", help="clear OUT first (no cached phases)")
    parser.add_argument("--no-write", action="store_true", help="leave BENCHMARKS.md, docs/ and results/ alone")


def phases_dir(args: argparse.Namespace) -> Path:
    """``args.out`` made absolute and ready (emptied first with ``--fresh``); also set on ``args``."""
    args.out = args.out.resolve()
    if args.fresh:
        shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    return args.out


def cpu_label() -> str:
    """The CPU as ``lscpu`` names it, its widest vector unit and core count, e.g. ``AMD EPYC 7B13, AVX2, 2 cores``:
    AVX2 and AVX-512 machines differ about 2x in speed, so a figure names which it came from."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "")
    flags = next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), [])
    vector = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return f"{model or platform.machine()}, {vector}, {os.cpu_count()} cores, no GPU"


def run_meta(module: str, argv: list[str] | None, **extra: Any) -> dict[str, Any]:
    """What a benchmark's record says of where it ran: its command (``python -m <module>`` and its arguments),
    the commit, :func:`cpu_label` and the date, then ``extra``."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True)
    return {
        "command": " ".join([f"python -m {module}", *(argv if argv is not None else sys.argv[1:])]),
        "commit": commit.stdout.strip() or "unknown",
        "machine": cpu_label(),
        "date": datetime.date.today().isoformat(),
        **extra,
    }
