"""The base model's greedy strict and lenient accuracy on the screening split and on a preset's held-out split of
the same task, in one process, with one engine and one grader, broken down by the terms' size.

    python -m benchmarks.learning.strict_gap [--preset configs/arithmetic_smollm2.yaml] [--candidate add2_d2]
        [--screen-problems 100] [--held-out-problems 200] [--no-write]

The screening split is :mod:`benchmarks.learning.screen_tasks`' (its seed, its candidate's recipe, ``default.yaml``'s
prompt); the held-out split is the preset's. Both are answered greedily by the same rollout worker (the preset's)
and graded by the same reward worker, so a gap between them is the problems', not the code's. Each accuracy comes
with its 95% Wilson interval. Writes BENCHMARKS.md's "Screening and held-out, strictly graded".
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from benchmarks.harness.cli import section_parser
from relay.repo import REPO_ROOT

MARKS = ("<!-- strict-gap:begin -->", "<!-- strict-gap:end -->")
TITLE = "Screening and held-out, strictly graded"


def term_band(question: str) -> str:
    """The band of a two-term sum by its larger term.

    >>> term_band("Calculate 4 + 7."), term_band("Calculate 66 + 8."), term_band("Calculate 100 + 3.")
    ('both terms < 10', 'a term 10-99', 'a term of 100')
    """
    largest = max(int(n) for n in re.findall(r"\d+", question)[:2])
    return "both terms < 10" if largest < 10 else ("a term 10-99" if largest < 100 else "a term of 100")


def split_accuracy(questions: list[str], strict: list[float], lenient: list[float]) -> dict[str, Any]:
    """Strict and lenient accuracy with intervals, as a whole and by :func:`term_band`."""
    from relay.evaluation.metrics import wilson_interval

    def figures(rows: list[int]) -> dict[str, Any]:
        n, ks, kl = len(rows), sum(strict[i] for i in rows), sum(lenient[i] for i in rows)
        return {"problems": n, "strict": ks / n, "strict_ci": wilson_interval(ks, n), "lenient": kl / n,
                "lenient_ci": wilson_interval(kl, n)}  # fmt: skip

    bands: dict[str, list[int]] = {}
    for i, q in enumerate(questions):
        bands.setdefault(term_band(q), []).append(i)
    return {"all": figures(list(range(len(questions)))), "bands": {b: figures(r) for b, r in sorted(bands.items())}}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from transformers import AutoTokenizer

    from benchmarks.learning.screen_tasks import CANDIDATES, PRESET, candidate_overrides
    from driver.evaluate import generate_and_grade, reward_worker, rollout_worker
    from relay.config import load_config
    from relay.evaluation.report import row_grades
    from relay.models.paths import resolve_model_path
    from relay.tasks.prompt_source import validation_prompts

    screen_args = argparse.Namespace(
        problems=args.screen_problems, max_new_tokens=args.max_new_tokens, temperature=0.7, k=0
    )
    model = f"model.path={args.model}"
    held = load_config(REPO_ROOT / args.preset, [model, *args.set])
    screen = load_config(PRESET, [*candidate_overrides(CANDIDATES[args.candidate], screen_args), model, *args.set])
    model_dir = resolve_model_path(held.cfg.model.path)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    worker, grader = rollout_worker(held, model_dir), reward_worker(held.cfg)
    result = {}
    try:
        for name, loaded, n in (
            ("screening", screen, args.screen_problems),
            ("held-out", held, args.held_out_problems),
        ):
            prompts = validation_prompts(loaded.cfg.data, tokenizer, n)
            rows, graded = generate_and_grade(worker, grader, prompts, 0, held.cfg.trainer.seed, True)
            questions = [str(q) for q in rows.non_tensor["question"]]
            strict, lenient = row_grades(rows, graded, "acc").tolist(), row_grades(rows, graded, "acc_lenient").tolist()
            result[name] = split_accuracy(questions, strict, lenient)
    finally:
        grader.close()
    return result


def report(result: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = [f"`{meta['command']}` at `{meta['commit']}`, {meta['machine']}, {meta['date']}: greedy answers of "
             f"`{meta['model']}`, one engine and one grader for both splits.", "",
             "| split | band | problems | strict [95% CI] | lenient [95% CI] |", "|---|---|---|---|---|"]  # fmt: skip
    for split, figures in result.items():
        for band, f in [("all", figures["all"]), *figures["bands"].items()]:
            s, lo = f["strict_ci"], f["lenient_ci"]
            lines.append(
                f"| {split} | {band} | {f['problems']} | {f['strict']:.3f} [{s[0]:.3f}, {s[1]:.3f}] | "
                f"{f['lenient']:.3f} [{lo[0]:.3f}, {lo[1]:.3f}] |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from benchmarks.harness.cli import run_meta
    from benchmarks.harness.publish import publish
    from benchmarks.learning.screen_tasks import CANDIDATES

    parser = section_parser(__doc__.splitlines()[0])
    parser.add_argument("--preset", default="configs/arithmetic_smollm2.yaml")
    parser.add_argument("--candidate", default="add2_d2", choices=list(CANDIDATES))
    parser.add_argument("--screen-problems", type=int, default=100)
    parser.add_argument("--held-out-problems", type=int, default=200)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--set", action="append", default=[], help="more config overrides (both splits)")
    args = parser.parse_args(argv)
    result = measure(args)
    meta = run_meta("benchmarks.learning.strict_gap", argv, model=args.model)
    publish("strict_gap", {"meta": meta, "splits": result}, report(result, meta), MARKS, TITLE, not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
