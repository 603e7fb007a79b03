"""Rule grading throughput: GSM8K answer extraction + math-verify, 0 (in-process) vs 1 vs N grader processes.

    python -m benchmarks.speed.reward_grading [--items 1319] [--workers 1 2] [--repeats 3]

The items are the GSM8K test set's gold solutions graded against their own answers (every one must
score 1.0, so the benchmark also checks the grader) — the same per-item work as grading a policy's
well-formed responses. Writes ``benchmarks/results/reward_grading.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

from relay.repo import REPO_ROOT

RESULTS = REPO_ROOT / "benchmarks" / "results"


def load_items(limit: int) -> tuple[list[str], list[str]]:
    from relay.data import load_gsm8k

    path = REPO_ROOT / "data/gsm8k/test.jsonl"
    with path.open(encoding="utf-8") as f:
        solutions = [json.loads(line)["answer"] for line in f][:limit]
    truths = [e.ground_truth for e in load_gsm8k(path)][:limit]
    return solutions, truths


def time_pool(workers: int, responses: list[str], truths: list[str], repeats: int) -> dict:
    from relay.scoring.pool import GraderPool

    rates = []
    with GraderPool(workers) as pool:
        pool.grade_batch(responses[:8], truths[:8], timeout_s=60.0)  # warm-up
        for _ in range(repeats):
            start = time.perf_counter()
            results = pool.grade_batch(responses, truths, timeout_s=600.0, item_timeout_s=5.0)
            elapsed = time.perf_counter() - start
            wrong = sum(r["score"] != 1.0 for r in results)
            if wrong:
                raise RuntimeError(f"{wrong} gold solutions did not score 1.0 with {workers} workers")
            rates.append(len(responses) / elapsed)
    return {"items_per_s": rates, "median_items_per_s": statistics.median(rates)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1319)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, os.cpu_count() or 2])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    responses, truths = load_items(args.items)
    runs = {0: time_pool(0, responses, truths, args.repeats)}
    for w in args.workers:
        runs[w] = time_pool(w, responses, truths, args.repeats)
    base = runs[1]["median_items_per_s"] if 1 in runs else runs[0]["median_items_per_s"]
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "args": vars(args),
        "runs": {str(k): v for k, v in runs.items()},
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "reward_grading.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"| grader processes | items/s (median of {args.repeats}) | spread | vs 1 process |")
    print("|---|---:|---|---:|")
    for w, run in runs.items():
        label = "0 (in the reward actor)" if w == 0 else str(w)
        lo, hi = min(run["items_per_s"]), max(run["items_per_s"])
        median = run["median_items_per_s"]
        print(f"| {label} | {median:.0f} | {lo:.0f}-{hi:.0f} | {median / base:.2f}x |")
    print(f"results: {out}")


if __name__ == "__main__":
    main()
