"""Command-line pieces shared by the benchmark scripts."""

from __future__ import annotations

import argparse


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
