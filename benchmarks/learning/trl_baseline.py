"""TRL 1.16 GRPOTrainer for a wall-clock budget with a Relay preset's settings (the learning benchmark's baseline).

    python -m benchmarks.learning.trl_baseline --config configs/arithmetic_smollm2.yaml --minutes 30 --out DIR
        [--save-minutes 5,10,15] [--vllm] [--set KEY=VALUE ...]

What it shares with the Relay run of the same preset:

* the model (``model.path``), the preset's training problems (any task: a file or a generated split) in the order
  Relay's ``PromptBatcher`` draws them (``data.shuffle_seed``), each prompt as Relay builds it (the task's chat
  messages, ``relay.tasks.run_tasks.RunTasks.prompt``), prompts over ``data.max_prompt_length`` dropped as Relay
  drops them, ``rollout.batch_size`` prompts x ``rollout.n`` completions per step of at most
  ``data.max_response_length`` tokens at ``rollout.temperature``;
* the reward: Relay's grading of each row by its task's grader (``reward.grader``/``grader_options`` when set),
  with ``reward.format_score`` and ``reward.use_last_number_fallback``, minus Relay's overlong penalty
  (``relay.scoring.overlong``, on TRL's completion token counts, EOS included as in Relay's ``response_length``)
  when ``reward.overlong_buffer.enable``;
* the objective: clip range ``algorithm.clip_ratio_low/high``, KL loss ``algorithm.kl_loss_coef`` (0 when
  ``use_kl_loss`` is off), token-mean aggregation (TRL's ``dapo``), AdamW at the preset's constant peak learning
  rate, grad-norm clip ``train.optimizer.clip_norm``, one optimizer step per generation round
  (``benchmarks.harness.trl_config.build_config``);
* the stop rule: :class:`relay.run.budget.WallClockBudget`, the clock starting with the first step.

What it does not share: Relay's group filter (``algorithm.filter_groups``, DAPO's dynamic sampling) has no TRL
counterpart, so TRL trains on every group, including those whose samples all scored the same.

It writes ``DIR/metrics.jsonl`` (one row per step in Relay's metric names: ``reward/mean``, ``reward/accuracy``,
``reward/format_rate``, ``actor/kl``, ``response/length_mean``, ``timing/step``, ``time/elapsed_s``), so
``relay.run.summarize`` reads it like a Relay run; the policy at the end of the first step past each of
``--save-minutes`` to ``DIR/checkpoints/step_NNNNNN`` (listed in ``DIR/checkpoints.jsonl`` with its step and
training minutes) and the final policy to ``DIR/final`` (HF format), for ``python -m driver.evaluate
--checkpoint``. fp32, CPU; TRL samples with ``model.generate``, or with ``--vllm`` with vLLM in this process
(TRL's colocate mode).
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

from benchmarks.harness.trl_config import build_config, completion_text
from relay.metrics import outcomes as om
from relay.metrics import policy as pm
from relay.metrics import system as sm
from relay.scoring.grade_settings import GradeSettings

# Steps of prompts laid out in the dataset; the budget ends the run long before (SmolLM2 on 2 cores: ~2 min/step).
MAX_STEPS = 2000


class GradedReward:
    """A TRL reward function (Relay's grading, each row by its task's grader) that also keeps each call's accuracy
    and format rate."""

    __name__ = "relay_grade"

    def __init__(
        self,
        format_score: float,
        overlong: tuple[int, int, float] | None = None,
        grader_options: dict[str, dict[str, Any]] | None = None,
        use_last_number_fallback: bool = False,
    ) -> None:
        """``overlong``: ``(max_response_length, buffer length, penalty factor)`` of Relay's soft overlong
        penalty, or None for none; ``grader_options``: each grader's options (``RunTasks.grading``)."""
        self.settings = GradeSettings(format_score=format_score, use_last_number_fallback=use_last_number_fallback)
        self.grader_options = grader_options or {}
        self.overlong = overlong
        self.calls: list[dict[str, float]] = []

    def __call__(
        self,
        completions: list,
        ground_truth: list[str],
        grader: list[str] | None = None,
        completion_ids: list | None = None,
        **_: Any,
    ) -> list[float]:
        """Scores of ``completions`` against ``ground_truth``, row i graded by ``grader[i]`` (the dataset's
        ``grader`` column; GSM8K's grader when absent)."""
        from relay.scoring.overlong import apply_overlong_penalty
        from relay.scoring.pool import GraderPool

        texts = [completion_text(c) for c in completions]
        results = GraderPool(0).grade_batch(
            texts, list(ground_truth), graders=grader, grader_options=self.grader_options, settings=self.settings
        )
        scores = [r["score"] for r in results]
        call = {
            om.REWARD_ACCURACY: float(np.mean([r["acc"] for r in results])),
            om.REWARD_FORMAT_RATE: float(np.mean([r["formatted"] for r in results])),
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


def ordered_problems(cfg: Any, tokenizer: Any, steps: int) -> dict[str, list]:
    """The first ``steps`` batches of Relay's prompt source for ``cfg`` (same filter, same order) as TRL's dataset
    columns: ``prompt`` (each row's chat messages, or its text without a chat template), ``ground_truth`` and
    ``grader`` (the row's task's grader, ``reward.grader`` for the run's task when set)."""
    from relay.tasks.prompt_source import PromptSource
    from relay.tasks.run_tasks import RunTasks

    tasks = RunTasks.from_config(cfg.data)
    graders = tasks.grading(cfg.reward.grader, cfg.reward.grader_options)["graders"]
    source = PromptSource.from_config(cfg.data, tokenizer, cfg.rollout.batch_size)
    columns: dict[str, list] = {"prompt": [], "ground_truth": [], "grader": []}
    for _ in range(steps):
        for example in source.batcher.next_batch():
            columns["prompt"].append(tasks.prompt(example))
            columns["ground_truth"].append(str(example.ground_truth))
            columns["grader"].append(graders[tasks.task_of(example).name])
    return columns


class CheckpointMarks:
    """Saves the policy at the end of the first step past each mark (training minutes), into ``out/checkpoints``,
    each listed in ``out/checkpoints.jsonl`` as ``{"step", "minutes", "path"}``."""

    def __init__(self, minutes: list[float], out: Path, tokenizer: Any) -> None:
        self.marks = sorted(minutes)
        self.out = out
        self.tokenizer = tokenizer

    def due(self, elapsed_s: float) -> bool:
        return bool(self.marks) and elapsed_s >= self.marks[0] * 60

    def save(self, model: Any, step: int, elapsed_s: float) -> None:
        path = self.out / "checkpoints" / f"step_{step:06d}"
        model.save_pretrained(str(path))
        self.tokenizer.save_pretrained(str(path))
        with (self.out / "checkpoints.jsonl").open("a") as f:
            f.write(json.dumps({"step": step, "minutes": elapsed_s / 60, "path": str(path)}) + "\n")
        while self.due(elapsed_s):
            self.marks.pop(0)


def grpo_config(cfg: Any, out: Path, vllm: bool = False) -> Any:
    """TRL's GRPOConfig with ``cfg``'s batch, lengths, sampling, objective and optimizer (see the module
    docstring); with ``vllm``, TRL samples with vLLM in this process (``use_vllm``, ``vllm_mode="colocate"``).
    SystemExit for an optimizer this baseline cannot mirror."""
    algo, opt = cfg.algorithm, cfg.train.optimizer
    if opt.lr_schedule.type != "constant" or opt.name != "adamw":
        raise SystemExit(f"this baseline mirrors a constant-LR AdamW preset, got {opt.name}/{opt.lr_schedule.type}")
    grpo = build_config(
        batch=cfg.rollout.batch_size * cfg.rollout.n,
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
    grpo.weight_decay, grpo.adam_beta1, grpo.adam_beta2, grpo.adam_epsilon = opt.weight_decay, opt.b1, opt.b2, opt.eps
    if vllm:
        grpo.use_vllm, grpo.vllm_mode = True, "colocate"
        grpo.vllm_max_model_length = cfg.data.max_prompt_length + cfg.data.max_response_length
    return grpo


def graded_reward(cfg: Any) -> GradedReward:
    """The reward function of ``cfg``: its format score, last-number fallback, grader options, overlong penalty."""
    from relay.tasks.run_tasks import RunTasks

    ob = cfg.reward.overlong_buffer
    grading = RunTasks.from_config(cfg.data).grading(cfg.reward.grader, cfg.reward.grader_options)
    return GradedReward(
        cfg.reward.format_score,
        (cfg.data.max_response_length, ob.length, ob.penalty_factor) if ob.enable else None,
        grading["options"],
        bool(cfg.reward.use_last_number_fallback),
    )


def budget_callback(budget: Any, reward: GradedReward, marks: CheckpointMarks, metrics_file: Any) -> Any:
    """A TrainerCallback that times each step, writes its metrics row, saves at ``marks`` and stops the run by the
    budget's rule."""
    from transformers import TrainerCallback

    class Budgeted(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            budget.step_started()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            budget.step_ended()
            if marks.due(budget.elapsed_s()):
                marks.save(kwargs["model"], state.global_step, budget.elapsed_s())
            if not budget.next_step_fits():
                control.should_training_stop = True

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            if not logs or "reward" not in logs or "train_runtime" in logs:
                return
            row = {
                sm.STEP: state.global_step - 1,
                om.REWARD_MEAN: logs["reward"],
                om.REWARD_STD: logs.get("reward_std"),
                pm.ACTOR_KL: logs.get("kl"),
                om.RESPONSE_LENGTH_MEAN: logs.get("completions/mean_length"),
                sm.TIMING_STEP: budget.last_step_s,
                sm.TIME_ELAPSED: budget.elapsed_s(),
                **(reward.calls[-1] if reward.calls else {}),
            }
            metrics_file.write(json.dumps(row) + "\n")
            metrics_file.flush()
            print(
                f"trl step {row[sm.STEP]}: reward {row[om.REWARD_MEAN]:.3f} accuracy "
                f"{row.get(om.REWARD_ACCURACY, float('nan')):.2f} {budget.elapsed_s() / 60:.1f} min",
                file=sys.stderr,
                flush=True,
            )

    return Budgeted()


def run(
    config: str,
    overrides: list[str],
    minutes: float,
    out: Path,
    threads: int,
    save_minutes: list[float],
    vllm: bool = False,
) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    from relay.config import load_config
    from relay.models.paths import resolve_model_path
    from relay.run.budget import WallClockBudget

    cfg = load_config(config, overrides).cfg
    torch.set_num_threads(threads or os.cpu_count() or 1)
    model_dir = str(resolve_model_path(cfg.model.path))
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left", truncation_side="left")
    dataset = Dataset.from_dict(ordered_problems(cfg, tokenizer, MAX_STEPS))
    reward, budget = graded_reward(cfg), WallClockBudget(minutes)
    out.mkdir(parents=True, exist_ok=True)
    (out / "checkpoints.jsonl").unlink(missing_ok=True)
    with (out / "metrics.jsonl").open("w") as metrics_file:
        callback = budget_callback(budget, reward, CheckpointMarks(save_minutes, out, tokenizer), metrics_file)
        trainer = GRPOTrainer(
            model=model_dir,
            reward_funcs=reward,
            args=grpo_config(cfg, out, vllm),
            train_dataset=dataset,
            processing_class=tokenizer,
            callbacks=[callback],
        )
        start = time.perf_counter()
        trainer.train()
    trainer.save_model(str(out / "final"))
    tokenizer.save_pretrained(str(out / "final"))
    summary = {
        "steps": trainer.state.global_step,
        "train_seconds": budget.elapsed_s(),
        "process_seconds": time.perf_counter() - start,
        "budget_minutes": minutes,
        "model": model_dir,
        "completions_per_step": cfg.rollout.batch_size * cfg.rollout.n,
        "sampling": "vllm" if vllm else "transformers generate",
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
    parser.add_argument(
        "--save-minutes", default="", help="comma-separated training minutes after which to save the policy"
    )
    parser.add_argument("--vllm", action="store_true", help="sample with vLLM (TRL's use_vllm, colocate mode)")
    args = parser.parse_args(argv)
    marks = [float(m) for m in args.save_minutes.split(",") if m.strip()]
    print(json.dumps(run(args.config, args.overrides, args.minutes, args.out, args.threads, marks, args.vllm)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
