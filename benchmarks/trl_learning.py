"""TRL 1.16 GRPOTrainer for a wall-clock budget with a Relay preset's settings (the learning benchmark's baseline).

    python -m benchmarks.trl_learning --config configs/gsm8k_smollm2_learn.yaml --minutes 40 --out DIR

What it shares with the Relay run of the same preset:

* the model (``model.path``), the GSM8K training problems in the order Relay's ``PromptBatcher`` draws them
  (``data.shuffle_seed``), the chat prompt (``data.prompt_template``), prompts over ``data.max_prompt_length``
  dropped as Relay drops them, ``rollout.batch_size`` prompts x ``rollout.n`` completions per step of at most
  ``data.max_response_length`` tokens at ``rollout.temperature``;
* the reward: Relay's grader, ``relay.scoring.grader.grade(text, truth, format_score=reward.format_score)``,
  minus Relay's overlong penalty (``relay.scoring.overlong``, on TRL's completion token counts, EOS included as
  in Relay's ``response_length``) when ``reward.overlong_buffer.enable``;
* the objective: clip range ``algorithm.clip_ratio_low/high``, KL loss ``algorithm.kl_loss_coef`` (0 when
  ``use_kl_loss`` is off), token-mean aggregation (TRL's ``dapo``), AdamW at the preset's constant peak learning
  rate, grad-norm clip ``train.optimizer.clip_norm``, one optimizer step per generation round
  (``benchmarks.trl_grpo.build_config``);
* the stop rule: :class:`relay.run.budget.WallClockBudget`, the clock starting with the first step.

It writes ``DIR/metrics.jsonl`` (one row per step in Relay's metric names: ``reward/mean``, ``reward/accuracy``,
``reward/format_rate``, ``actor/kl``, ``response/length_mean``, ``timing/step``, ``time/elapsed_s``), so
``relay.run.summarize`` reads it like a Relay run, and the final policy to ``DIR/final`` (HF format) for
``python -m driver.evaluate --checkpoint DIR/final``. fp32, CPU, no vLLM (TRL samples with ``model.generate``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.trl_grpo import _completion_text, build_config

# Steps of prompts laid out in the dataset; the budget ends the run long before (SmolLM2 on 2 cores: ~2 min/step).
MAX_STEPS = 2000


class GradedReward:
    """A TRL reward function (Relay's grader) that also keeps each call's accuracy and format rate."""

    __name__ = "relay_grade"

    def __init__(self, format_score: float, overlong: tuple[int, int, float] | None = None) -> None:
        """``overlong``: ``(max_response_length, buffer length, penalty factor)`` of Relay's soft overlong
        penalty, or None for none."""
        self.format_score = format_score
        self.overlong = overlong
        self.calls: list[dict[str, float]] = []

    def __call__(
        self, completions: list, ground_truth: list[str], completion_ids: list | None = None, **_: Any
    ) -> list[float]:
        from relay.scoring.grader import grade
        from relay.scoring.overlong import apply_overlong_penalty

        results = [
            grade(_completion_text(c), truth, format_score=self.format_score)
            for c, truth in zip(completions, ground_truth, strict=True)
        ]
        scores = [r["score"] for r in results]
        call = {
            "reward/accuracy": float(np.mean([r["acc"] for r in results])),
            "reward/format_rate": float(np.mean([r["formatted"] for r in results])),
        }
        if self.overlong is not None:
            if completion_ids is None:
                raise RuntimeError("the overlong penalty needs TRL's completion_ids (TRL >= 0.20 passes them)")
            scores, overlong_metrics = apply_overlong_penalty(
                scores, [len(ids) for ids in completion_ids], *self.overlong
            )
            call.update(overlong_metrics)
            scores = [float(s) for s in scores]
        self.calls.append(call)
        return scores


def ordered_problems(cfg: Any, tokenizer: Any, steps: int) -> tuple[list[list[dict]], list[str]]:
    """The first ``steps`` batches of Relay's prompt source for ``cfg`` (same filter, same order), as TRL's
    chat-message prompts and ground truths."""
    from relay.data.gsm8k import build_messages
    from relay.data.prompt_source import PromptSource

    source = PromptSource.from_config(cfg.data, tokenizer, cfg.rollout.batch_size)
    prompts, truths = [], []
    for _ in range(steps):
        batch = source.next_batch()
        prompts += [build_messages(q, cfg.data.prompt_template) for q in batch.non_tensor["question"]]
        truths += [str(t) for t in batch.non_tensor["ground_truth"]]
    return prompts, truths


def run(config: str, overrides: list[str], minutes: float, out: Path, threads: int) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOTrainer

    from relay.config import load_config
    from relay.models.paths import resolve_model_path
    from relay.run.budget import WallClockBudget

    loaded = load_config(config, overrides)
    cfg = loaded.cfg
    algo, opt = cfg.algorithm, cfg.train.optimizer
    if opt.lr_schedule.type != "constant" or opt.name != "adamw":
        raise SystemExit(
            f"{config}: this baseline mirrors a constant-LR AdamW preset, got {opt.name}/{opt.lr_schedule.type}"
        )
    torch.set_num_threads(threads or os.cpu_count() or 1)
    model_dir = str(resolve_model_path(cfg.model.path))
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left", truncation_side="left")
    prompts, truths = ordered_problems(cfg, tokenizer, MAX_STEPS)
    batch = cfg.rollout.batch_size * cfg.rollout.n
    grpo = build_config(
        batch=batch,
        micro_steps=1,
        n=cfg.rollout.n,
        max_new_tokens=cfg.data.max_response_length,
        learning_rate=opt.lr_schedule.peak_value,
        steps=MAX_STEPS,
        temperature=cfg.rollout.temperature,
        beta=algo.kl_loss_coef if algo.use_kl_loss else 0.0,
        seed=cfg.trainer.seed,
        output_dir=str(out / "trainer"),
    )
    grpo.epsilon, grpo.epsilon_high = algo.clip_ratio_low, algo.clip_ratio_high
    grpo.max_grad_norm = opt.clip_norm
    ob = cfg.reward.overlong_buffer
    overlong = (cfg.data.max_response_length, ob.length, ob.penalty_factor) if ob.enable else None
    reward = GradedReward(cfg.reward.format_score, overlong)
    budget = WallClockBudget(minutes)
    out.mkdir(parents=True, exist_ok=True)
    metrics_file = (out / "metrics.jsonl").open("w")

    class Budgeted(TrainerCallback):
        """Times each step, writes its metrics row and stops the run by the budget's rule."""

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            budget.step_started()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            budget.step_ended()
            if not budget.next_step_fits():
                control.should_training_stop = True

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            if not logs or "reward" not in logs or "train_runtime" in logs:
                return
            row = {
                "step": state.global_step - 1,
                "reward/mean": logs["reward"],
                "reward/std": logs.get("reward_std"),
                "actor/kl": logs.get("kl"),
                "response/length_mean": logs.get("completions/mean_length"),
                "timing/step": budget.last_step_s,
                "time/elapsed_s": budget.elapsed_s(),
                **(reward.calls[-1] if reward.calls else {}),
            }
            metrics_file.write(json.dumps(row) + "\n")
            metrics_file.flush()
            print(
                f"trl step {row['step']}: reward {row['reward/mean']:.3f} format "
                f"{row.get('reward/format_rate', float('nan')):.2f} {budget.elapsed_s() / 60:.1f} min",
                file=sys.stderr,
                flush=True,
            )

    trainer = GRPOTrainer(
        model=model_dir,
        reward_funcs=reward,
        args=grpo,
        train_dataset=Dataset.from_dict({"prompt": prompts, "ground_truth": truths}),
        processing_class=tokenizer,
        callbacks=[Budgeted()],
    )
    start = time.perf_counter()
    trainer.train()
    metrics_file.close()
    trainer.save_model(str(out / "final"))
    tokenizer.save_pretrained(str(out / "final"))
    summary = {
        "steps": trainer.state.global_step,
        "train_seconds": budget.elapsed_s(),
        "process_seconds": time.perf_counter() - start,
        "budget_minutes": minutes,
        "model": model_dir,
        "completions_per_step": batch,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the Relay preset whose settings TRL gets")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--minutes", type=float, required=True, help="wall-clock budget of the training")
    parser.add_argument("--out", type=Path, required=True, help="directory for metrics.jsonl and final/")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.config, args.overrides, args.minutes, args.out, args.threads)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
