"""Screen candidate tasks before training: how often the model already gets each one right.

    python -m benchmarks.learning.screen_tasks [--model smollm2-135m] [--candidates add2_d2 chain3_d2 ...]
        [--problems 100] [--k 8] [--max-new-tokens 64] [--temperature 0.7] [--no-write]

GRPO learns only from groups whose samples disagree: a task the model never solves gives every group the same
reward, one it always solves gives nothing to improve. Each candidate (a reasoning-gym recipe, :data:`CANDIDATES`)
gets ``--problems`` problems from a screening seed that neither training nor the presets' validation use, a greedy
answer and ``k`` samples each, graded strictly (the answer in ``\\boxed{}``) and leniently (the last number), with
the split's majority-answer baseline. A candidate is **in the band** where GRPO has signal when its lenient greedy
accuracy is within :data:`BAND` and its lenient pass@k is at least :data:`PASS_MARGIN` above it (some samples
are right where the greedy answer is not), and its majority baseline under :data:`MAX_MAJORITY` (a split whose most
common answer is that common can be "learned" by giving it). One rollout engine and one grader serve every
candidate.

Writes the table to BENCHMARKS.md ("Picking a task by measuring it") and ``benchmarks/results/screen_tasks.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from benchmarks.harness.cli import section_parser
from relay.metrics import validation as vm
from relay.repo import REPO_ROOT

PRESET = REPO_ROOT / "configs" / "default.yaml"
SCREEN_SEED = 7_000_000  # the screening problems' seed: far from every preset's seed and test_seed
BAND = (0.15, 0.60)  # lenient greedy accuracy where GRPO has signal from the first step
PASS_MARGIN = 0.15  # lenient pass@k at least this far above lenient greedy: samples find what greedy misses
MAX_MAJORITY = 0.2  # a split whose most common answer is this common can be "learned" by giving that answer
MARKS = ("<!-- screen-tasks:begin -->", "<!-- screen-tasks:end -->")
TITLE = "Picking a task by measuring it"


def basic_arithmetic(terms: int, digits: tuple[int, int], operator: str) -> list[dict[str, Any]]:
    """A recipe of ``terms`` numbers of ``digits`` (low, high) digits joined by ``operator``, no parentheses or
    negative numbers: ``basic_arithmetic(2, (1, 2), "+")`` asks e.g. "Calculate 47 + 8."."""
    low, high = digits
    config = {"min_terms": terms, "max_terms": terms, "min_digits": low, "max_digits": high, "operators": [operator]}
    return [{"name": "basic_arithmetic", "config": {**config, "allow_parentheses": False, "allow_negation": False}}]


CANDIDATES: dict[str, list[dict[str, Any]]] = {
    "add2_d1": basic_arithmetic(2, (1, 1), "+"),
    "add2_d2": basic_arithmetic(2, (1, 2), "+"),
    "add2_d3": basic_arithmetic(2, (2, 3), "+"),
    "add3_d2": basic_arithmetic(3, (1, 2), "+"),
    "chain3_d2": [{"name": "chain_sum", "config": {"min_terms": 3, "max_terms": 3, "min_digits": 1, "max_digits": 2}}],
    # Not screened by default (the defaults take about ten minutes on 2 cores): another operator, and two of
    # reasoning-gym's non-arithmetic datasets.
    "sub2_d2": basic_arithmetic(2, (1, 2), "-"),
    "mul2_d1": basic_arithmetic(2, (1, 1), "*"),
    "letter_counting": [{"name": "letter_counting", "config": {"min_words": 5, "max_words": 10}}],
    "number_sorting": [{"name": "number_sorting", "config": {"min_numbers": 3, "max_numbers": 4}}],
}
DEFAULT_CANDIDATES = ["add2_d1", "add2_d2", "add2_d3", "add3_d2", "chain3_d2"]


def candidate_overrides(datasets: list[dict[str, Any]], args: argparse.Namespace) -> list[str]:
    """The config of one candidate: the reasoning-gym task, its recipe, the screening split and the sampling."""
    problems, k = args.problems, args.k
    return [
        "data.task=reasoning_gym",
        "data.train_path=null",
        "data.test_path=null",
        f"data.generate.test_seed={SCREEN_SEED}",
        f"data.generate.test_size={problems}",
        f"data.generate.options.datasets={json.dumps(datasets)}",
        f"data.max_response_length={args.max_new_tokens}",
        f"rollout.temperature={args.temperature}",
        f"trainer.val_samples={problems}",
        f"trainer.val_k={k}",
    ]


def in_band(metrics: dict[str, float], k: int) -> bool:
    """Lenient greedy accuracy within :data:`BAND`, lenient pass@k at least :data:`PASS_MARGIN` above it, and a
    majority baseline under :data:`MAX_MAJORITY`."""
    greedy = metrics[vm.VAL_LENIENT_ACCURACY]
    signal = BAND[0] <= greedy <= BAND[1] and metrics[vm.VAL_LENIENT_PASS_AT_K.format(k=k)] >= greedy + PASS_MARGIN
    return signal and metrics[vm.VAL_MAJORITY_BASELINE] < MAX_MAJORITY


def screen(args: argparse.Namespace) -> dict[str, Any]:
    """Every candidate's ``val/*`` metrics, seconds and band verdict (one engine and one grader for all)."""
    from transformers import AutoTokenizer

    from driver.evaluate import generate_and_grade, reward_worker, rollout_worker
    from relay.config import load_config
    from relay.evaluation import validation_metrics
    from relay.models.paths import resolve_model_path
    from relay.tasks.prompt_source import validation_prompts

    model_dir = resolve_model_path(args.model)
    first = candidate_overrides(CANDIDATES[args.candidates[0]], args)
    loaded = load_config(PRESET, [*first, f"model.path={model_dir}"])
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    worker, grader = rollout_worker(loaded, model_dir), reward_worker(loaded.cfg)
    results: dict[str, Any] = {}
    try:
        for name in args.candidates:
            overrides = candidate_overrides(CANDIDATES[name], args)
            cfg = load_config(PRESET, [*overrides, f"model.path={model_dir}"]).cfg
            start = time.perf_counter()
            prompts = validation_prompts(cfg.data, tokenizer, args.problems)
            rows, graded = generate_and_grade(worker, grader, prompts, args.k, loaded.cfg.trainer.seed, True)
            metrics = validation_metrics(rows, graded, args.k)
            results[name] = {
                "datasets": CANDIDATES[name],
                "metrics": metrics,
                "seconds": time.perf_counter() - start,
                "in_band": in_band(metrics, args.k),
            }
            print(f"{name}: {row_line(name, results[name], args.k)}", file=sys.stderr)
    finally:
        grader.close()
    return results


def row_line(name: str, result: dict[str, Any], k: int) -> str:
    """One table row: strict and lenient greedy with intervals, mean@k, pass@k, baseline, format, band."""
    m = result["metrics"]

    def ci(keys: tuple[str, str, str]) -> str:
        acc, low, high = (m[key] for key in keys)
        return f"{acc:.2f} [{low:.2f}, {high:.2f}]"

    cells = [
        f"`{name}`",
        ci((vm.VAL_ACCURACY, vm.VAL_ACCURACY_CI_LOW, vm.VAL_ACCURACY_CI_HIGH)),
        ci((vm.VAL_LENIENT_ACCURACY, vm.VAL_LENIENT_CI_LOW, vm.VAL_LENIENT_CI_HIGH)),
        f"{m[vm.VAL_MEAN_AT_K.format(k=k)]:.2f} / {m[vm.VAL_LENIENT_MEAN_AT_K.format(k=k)]:.2f}",
        f"{m[vm.VAL_PASS_AT_K.format(k=k)]:.2f} / {m[vm.VAL_LENIENT_PASS_AT_K.format(k=k)]:.2f}",
        f"{m[vm.VAL_MAJORITY_BASELINE]:.2f}",
        f"{m[vm.VAL_FORMAT_RATE]:.2f}",
        f"{result['seconds']:.0f}",
        "**yes**" if result["in_band"] else "no",
    ]
    return "| " + " | ".join(cells) + " |"


def report(results: dict[str, Any], args: argparse.Namespace, meta: dict[str, Any]) -> str:
    """The BENCHMARKS.md section: the table, each candidate's recipe, and how it was run."""
    k = args.k
    lines = [
        f"`{command_line(args)}` on {meta['machine']}, {meta['date']}, commit `{meta['commit']}`, "
        f"{meta['minutes']:.1f} min: {args.model}, {args.problems} problems per candidate (seed {SCREEN_SEED}, "
        f"used by no preset), greedy + {k} samples at temperature {args.temperature}, {args.max_new_tokens} new "
        "tokens, the prompt asking for `\\boxed{}`.",
        "",
        f"| candidate | strict greedy [95% CI] | lenient greedy [95% CI] | mean@{k} strict / lenient | "
        f"pass@{k} strict / lenient | majority baseline | format (greedy) | seconds | in the band |",
        "|---|---|---|---|---|---:|---:|---:|---|",
        *(row_line(name, result, k) for name, result in results.items()),
        "",
        f"In the band: lenient greedy within {BAND[0]:.0%}–{BAND[1]:.0%}, lenient pass@{k} at least "
        f"{PASS_MARGIN:.2f} above it, and the majority baseline under {MAX_MAJORITY}. Recipes (reasoning-gym "
        "generator configs):",
        "",
        *(f"- `{name}`: `{json.dumps(result['datasets'])}`" for name, result in results.items()),
    ]
    return "\n".join(lines)


def command_line(args: argparse.Namespace) -> str:
    """The command that reproduces ``args`` (the options that differ from the defaults)."""
    parts = ["python -m benchmarks.learning.screen_tasks"]
    if args.candidates != DEFAULT_CANDIDATES:
        parts.append("--candidates " + " ".join(args.candidates))
    defaults = {"model": "smollm2-135m", "problems": 100, "k": 8, "max_new_tokens": 64, "temperature": 0.7}
    parts += [
        f"--{key.replace('_', '-')} {getattr(args, key)}"
        for key, value in defaults.items()
        if getattr(args, key) != value
    ]
    return " ".join(parts)


def main(argv: list[str] | None = None) -> int:
    import datetime
    import subprocess

    from benchmarks.harness.cli import cpu_label
    from benchmarks.harness.publish import publish

    parser = section_parser(__doc__.splitlines()[0])
    parser.add_argument("--candidates", nargs="+", default=DEFAULT_CANDIDATES, choices=list(CANDIDATES))
    parser.add_argument("--problems", type=int, default=100, help="screening problems per candidate")
    parser.add_argument("--k", type=int, default=8, help="samples per problem besides the greedy one")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=0.7, help="the samples' (a preset's rollout.temperature)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    results = screen(args)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True)
    meta = {
        "machine": cpu_label(),
        "date": datetime.date.today().isoformat(),
        "commit": commit.stdout.strip() or "unknown",
        "minutes": (time.perf_counter() - start) / 60,
    }
    section = report(results, args, meta)
    result = {"meta": meta, "args": {k: v for k, v in vars(args).items() if k != "no_write"}, "candidates": results}
    publish("screen_tasks", result, section, MARKS, TITLE, not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
