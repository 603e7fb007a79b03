"""How far an LLM judge agrees with the exact grader, on held-out responses of a preset's task.

    python -m benchmarks.learning.judge_agreement [--preset configs/arithmetic_smollm2.yaml] [--judge smollm2-135m]
        [--samples 2] [--judge-engine hf] [--no-write]

The policy (``--model``, the preset's base model) answers each of the preset's held-out problems ``--samples`` times
at its rollout temperature; the exact grader grades each response strictly (the answer where the prompt asked for
it) and leniently (the last number); the judge (``reward_model.kind=judge`` with the default rubric, which shows it
the reference answer) gives each response P(yes). Reported: the confusion matrix at P(yes) >= 0.5 against each exact
reading, the agreement, the judge's mean P(yes) on right and on wrong responses, and the AUC (the chance that a
right response gets a higher P(yes) than a wrong one; 0.5 is no better than a coin). The judge runs on the rollout
engine's code in this process (``roles/reward_model_judge.py``), with no Ray.

Writes BENCHMARKS.md's "An LLM judge against the exact grader" and ``benchmarks/results/judge_agreement.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.harness.cli import section_parser
from relay.repo import REPO_ROOT

MARKS = ("<!-- judge-agreement:begin -->", "<!-- judge-agreement:end -->")
TITLE = "An LLM judge against the exact grader"


def agreement(p_yes: Sequence[float], right: Sequence[float], threshold: float = 0.5) -> dict[str, float]:
    """The judge's P(yes) against exact 0/1 grades: the confusion counts at ``threshold``, the agreement, the mean
    P(yes) on right and wrong responses, and the AUC (ties count half).

    >>> a = agreement([0.9, 0.6, 0.2, 0.7], [1, 0, 0, 1])
    >>> (a["true_yes"], a["false_yes"], a["false_no"], a["true_no"], a["agreement"], a["auc"])
    (2, 1, 0, 1, 0.75, 1.0)
    """
    p, y = np.asarray(p_yes, np.float64), np.asarray(right, np.float64) > 0.5
    said = p >= threshold
    pos, neg = p[y], p[~y]
    auc = float("nan")
    if len(pos) and len(neg):
        diff = pos[:, None] - neg[None, :]
        auc = float(((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size)
    return {
        "responses": len(p),
        "right": int(y.sum()),
        "true_yes": int((said & y).sum()),
        "false_yes": int((said & ~y).sum()),
        "false_no": int((~said & y).sum()),
        "true_no": int((~said & ~y).sum()),
        "agreement": float((said == y).mean()) if len(p) else float("nan"),
        "p_yes_right": float(pos.mean()) if len(pos) else float("nan"),
        "p_yes_wrong": float(neg.mean()) if len(neg) else float("nan"),
        "auc": auc,
    }


def sampled_responses(args: argparse.Namespace) -> tuple[Any, np.ndarray, np.ndarray, dict[str, Any]]:
    """The policy's sampled responses to the held-out problems and their strict and lenient grades."""
    from transformers import AutoTokenizer

    from driver.evaluate import generate_and_grade, reward_worker, rollout_worker
    from relay.config import load_config
    from relay.evaluation.report import row_grades
    from relay.models.paths import resolve_model_path
    from relay.tasks.prompt_source import validation_prompts

    loaded = load_config(REPO_ROOT / args.preset, [*args.set, f"model.path={args.model}"])
    model_dir = resolve_model_path(loaded.cfg.model.path)
    prompts = validation_prompts(loaded.cfg.data, AutoTokenizer.from_pretrained(str(model_dir)), args.problems)
    worker, grader = rollout_worker(loaded, model_dir), reward_worker(loaded.cfg)
    try:
        rows, graded = generate_and_grade(worker, grader, prompts, args.samples, loaded.cfg.trainer.seed, True)
    finally:
        grader.close()
    sampled = rows.batch["sample_index"] > 0  # the greedy answer (index 0) is left out: one per problem, no spread
    strict, lenient = row_grades(rows, graded, "acc")[sampled], row_grades(rows, graded, "acc_lenient")[sampled]
    meta = {"policy": str(model_dir), "problems": len(prompts), "temperature": float(loaded.cfg.rollout.temperature)}
    return rows.select(non_tensor_keys=["question", "response_text", "ground_truth"])[sampled], strict, lenient, meta


def judge_scores(rows: Any, args: argparse.Namespace) -> np.ndarray:
    """The judge's P(yes) of each row, with the default rubric."""
    from relay.models.paths import resolve_model_path
    from relay.scoring.judge import JudgeRubric
    from roles.reward_model_judge import JudgeScorer
    from roles.reward_model_settings import RewardModelSettings

    settings = RewardModelSettings(
        str(resolve_model_path(args.judge)), "judge", 16, 512, engine=args.judge_engine, judge=JudgeRubric()
    )
    judge = JudgeScorer(settings)
    text = {k: [str(v) for v in rows.non_tensor[k]] for k in ("question", "response_text", "ground_truth")}
    scores, _ = judge.score(text["question"], text["response_text"], text["ground_truth"])
    return scores


def report(result: dict[str, Any]) -> str:
    meta, lines = result["meta"], []
    lines.append(
        f"`{meta['command']}` at `{meta['commit']}`, {meta['machine']}, {meta['date']}, {meta['minutes']:.1f} min: "
        f"{meta['responses']} responses ({meta['problems']} held-out problems x {meta['samples']} samples at "
        f"temperature {meta['temperature']:g}), judged by `{meta['judge']}` on the {meta['judge_engine']} engine."
    )
    lines += ["", "| exact reading | right | judge yes & right | yes & wrong | no & right | no & wrong | agreement |"
              " P(yes) right | P(yes) wrong | AUC |", "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name in ("strict", "lenient"):
        a = result[name]
        lines.append(
            f"| {name} | {a['right']} | {a['true_yes']} | {a['false_yes']} | {a['false_no']} | {a['true_no']} | "
            f"{a['agreement']:.3f} | {a['p_yes_right']:.3f} | {a['p_yes_wrong']:.3f} | {a['auc']:.3f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from benchmarks.harness.cli import run_meta
    from benchmarks.harness.publish import publish

    parser = section_parser(__doc__.splitlines()[0])
    parser.add_argument("--preset", default="configs/arithmetic_smollm2.yaml")
    parser.add_argument("--set", action="append", default=[], help="more config overrides")
    parser.add_argument("--judge", default="smollm2-135m", help="the judge model (a directory or a prepared name)")
    parser.add_argument("--judge-engine", default="hf", choices=["hf", "vllm"])
    parser.add_argument("--problems", type=int, default=200, help="held-out problems (the preset's split)")
    parser.add_argument("--samples", type=int, default=2, help="sampled responses per problem")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows, strict, lenient, meta = sampled_responses(args)
    p_yes = judge_scores(rows, args)
    meta |= run_meta(
        "benchmarks.learning.judge_agreement",
        argv,
        minutes=(time.perf_counter() - start) / 60,
        responses=len(p_yes),
        samples=args.samples,
        judge=args.judge,
        judge_engine=args.judge_engine,
    )
    result = {
        "meta": meta,
        "strict": agreement(p_yes, strict),
        "lenient": agreement(p_yes, lenient),
        "p_yes": [float(p) for p in p_yes],
        "strict_grades": strict.tolist(),
        "lenient_grades": lenient.tolist(),
    }
    publish("judge_agreement", result, report(result), MARKS, TITLE, not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
