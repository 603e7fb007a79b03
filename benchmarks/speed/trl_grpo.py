"""TRL baseline: wall time of one ``trl.GRPOTrainer`` step on the CPU, split into phases.

    python -m benchmarks.speed.trl_grpo --model DIR [--prompts 4] [--n 4] [--max-new-tokens 32] [--steps 2]
        [--max-prompt-length 256] [--lr 1e-6] [--beta 0.001] [--threads 0]
        [--micro-batch-size M]

Runs TRL 1.16's ``GRPOTrainer`` (pinned in ``requirements/bench.lock``) on the given prompts with the
settings a Relay step uses, so the two can be compared on the same model, prompts, ``n``, lengths,
learning rate and number of steps. Every trainer step is exactly one generation round of
``len(prompts) * n`` completions and one AdamW update: ``num_generations=n``,
``per_device_train_batch_size * gradient_accumulation_steps = len(prompts) * n``, and
``steps_per_generation = gradient_accumulation_steps``, so the generation batch is the whole optimizer step
(``gradient_accumulation_steps`` is 1 unless ``micro_batch_size`` splits the backward into accumulated
micro-batches); this is asserted from the trainer's ``global_step``, its logs and our own per-step counts of
generation rounds and optimizer steps after training. The results print as JSON on stdout. The
dataset is exactly ``prompts`` (no shuffling), so each step uses every prompt once, in order, and with
``steps > 1`` the same prompts are cycled (one epoch per step).

How it measures:

* ``seconds_per_step``: a ``TrainerCallback``, ``time.perf_counter`` from ``on_step_begin`` to
  ``on_step_end`` (generation, scoring, reference log-probs, forward/backward, clipping, AdamW step;
  not the data loading before it nor the logging after it).
* ``phases``: ``GRPOTrainer._generate_and_score_completions`` (tokenise the chat prompts, sample with
  ``model.generate``, decode, grade, the reference model's forward, group-relative advantages) is timed
  by wrapping that bound method on the trainer instance; ``train`` is the rest of the step (policy
  forward with grad, loss, backward, grad clipping, optimizer step). Inside it, ``generate``
  (``_generate``: tokenise + sample + decode) and ``reward`` (``_calculate_rewards``: Relay's grader) are
  wrapped the same way; the remainder of ``generate_and_score`` is mostly the reference forward.
* ``completion_tokens``: TRL's logged ``completions/mean_length`` x the completions per step (exact: it
  is the mean of integer lengths, EOS included). ``rewards``: TRL's logged mean ``reward`` per step.
* ``peak_rss_gib``: this process's ``ru_maxrss`` (includes loading the policy and the reference copy).

The reward is Relay's own grader, ``relay.scoring.grader.grade(text, ground_truth, GradeSettings(format_score=0.1))``.
fp32 everywhere (``bf16=False``, ``model_init_kwargs={"dtype": "float32"}``), ``use_cpu=True``, no
vLLM, no gradient checkpointing (TRL turns it on by default; Relay's ``train.remat`` is off by default),
dropout disabled, constant LR with no warmup, AdamW (0.9, 0.999, 1e-8, no weight decay), grad-norm clip
1.0, clip range 0.2 on both sides. TRL's default ``loss_type="dapo"`` divides the summed token losses by
the step's total completion tokens, i.e. Relay's ``token-mean``.

What TRL 1.16 does differently from a plain (Relay) GRPO step, which a fair comparison must mention:

* No ``max_prompt_length`` option any more: prompts are never truncated. ``max_prompt_length`` is
  therefore only checked here: a chat-templated prompt longer than it raises ``ValueError`` (as Relay's
  ``data.truncation=error`` does; Relay's default drops such prompts at load time), so pass prompts that fit
  and both sides see the same untruncated prompts.
* Sampling: each of the ``len(prompts) * n`` rows is its own left-padded sequence in one
  ``model.generate`` call (the prompt is prefilled ``n`` times; no prefix sharing, no continuous batching,
  static padding to the longest prompt and the longest completion).
* KL: the k3 estimator ``exp(ref - logp) - (ref - logp) - 1`` without Relay's clipping of ``ref - logp``
  to [-20, 20] and of the result to [-10, 10]; only outlier tokens differ. TRL's default of multiplying the
  KL term by the (differentiable) importance ratio (``use_bias_correction_kl``) is turned off here, so the
  KL gradient is the plain one Relay uses.
* The reference model is a second full copy of the policy loaded in ``__init__`` (outside the timed
  steps); its forward runs inside ``_generate_and_score_completions``, so it counts in
  ``generate_and_score``, not in ``train``.
* No separate old-policy forward: with one optimizer step per generation TRL uses the detached
  current log-probs as the old ones (ratio 1, as Relay's ``old_log_prob_source=learner``).
* The policy forward also computes per-token entropy (a metric) through TRL's chunked fused LM head,
  which scores only completion positions and never holds the full logits.
* Advantages ``(r - mean) / (std + 1e-4)`` with the ddof=1 std per group; Relay adds 1e-6 instead.
* The first step includes one-off warm-up costs (allocator, thread pools); compare later steps.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness.trl_config import CPU_FP32, OBJECTIVE, OPTIMIZER, build_config, completion_text
from benchmarks.speed.trl_timing import StepTimer, check_one_round_per_step, quiet, step_logs, wrap_phases
from relay.repo import REPO_ROOT

FORMAT_SCORE = 0.1  # a formatted but wrong answer's reward (configs/default.yaml reward.format_score)


def relay_grade_reward(completions: list, ground_truth: list[str], **_: Any) -> list[float]:
    """TRL reward function: Relay's grader score of each completion against its prompt's ground truth."""
    from relay.scoring.grade_settings import GradeSettings
    from relay.scoring.grader import grade

    settings = GradeSettings(format_score=FORMAT_SCORE)
    return [
        grade(completion_text(c), truth, settings)["score"] for c, truth in zip(completions, ground_truth, strict=True)
    ]


def prompt_token_lengths(tokenizer: Any, prompts: list[list[dict]], max_prompt_length: int) -> list[int]:
    """Token count of each chat-templated prompt (generation prompt included); ValueError over the limit."""
    lengths = [
        len(tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"])
        for p in prompts
    ]
    too_long = [i for i, n in enumerate(lengths) if n > max_prompt_length]
    if too_long:
        raise ValueError(
            f"prompts {too_long} have {[lengths[i] for i in too_long]} tokens > max_prompt_length={max_prompt_length}; "
            "TRL 1.16 cannot truncate prompts, so pass shorter prompts or raise the limit on both sides"
        )
    return lengths


def _micro_steps(batch: int, micro_batch_size: int | None) -> int:
    """Gradient-accumulation steps for ``micro_batch_size`` sequences per forward/backward (None: one)."""
    micro = micro_batch_size or batch
    if micro < 1 or batch % micro:
        raise ValueError(f"micro_batch_size={micro_batch_size} must divide len(prompts) * n = {batch}")
    return batch // micro


# What a result records of the GRPOConfig a run used, beside the shared settings (benchmarks.harness.trl_config).
RUN_SETTINGS = (
    "num_generations",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "steps_per_generation",
    "generation_batch_size",
    "num_iterations",
    "max_steps",
    "max_completion_length",
    "temperature",
    "top_p",
    "top_k",
    "beta",
    "epsilon_high",
    "learning_rate",
    "shuffle_dataset",
    "seed",
)


def _versions() -> dict[str, str]:
    import torch
    import transformers
    import trl

    return {"trl": trl.__version__, "torch": torch.__version__, "transformers": transformers.__version__}


def _config_summary(args: Any) -> dict[str, Any]:
    """The GRPOConfig's settings a result records: the run's own and the shared groups'."""
    shared = (*CPU_FP32, *OBJECTIVE, *OPTIMIZER)
    return {k: getattr(args, k) for k in (*RUN_SETTINGS, *shared) if k != "model_init_kwargs"}


def run_trl_grpo(
    model_dir: str,
    prompts: list[list[dict]],
    ground_truths: list[str],
    *,
    n: int,
    max_prompt_length: int,
    max_new_tokens: int,
    learning_rate: float,
    steps: int,
    temperature: float = 1.0,
    beta: float = 0.001,
    seed: int = 0,
    threads: int = 0,
    output_dir: str | None = None,
    micro_batch_size: int | None = None,
) -> dict:
    """Train ``steps`` TRL GRPO steps of ``len(prompts) * n`` completions each and return the timings.

    ``prompts`` are chat message lists; all of them make one step's batch, cycled for every step.
    ``micro_batch_size`` (sequences per forward/backward, default the whole batch) only splits the
    backward into accumulated micro-batches; it never changes the generation round or the optimizer step.
    ``threads`` sets torch's intra-op threads (0: ``os.cpu_count()``). ``output_dir`` (default: a
    temporary directory) only receives what Trainer writes there; nothing is saved.
    """
    import torch
    from transformers import AutoTokenizer

    if len(prompts) != len(ground_truths) or not prompts:
        raise ValueError(f"{len(prompts)} prompts and {len(ground_truths)} ground truths: need equal, non-zero")
    torch.set_num_threads(threads or os.cpu_count() or 1)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left", truncation_side="left")
    prompt_lengths = prompt_token_lengths(tokenizer, prompts, max_prompt_length)
    batch = len(prompts) * n
    settings = dict(
        n=n, max_new_tokens=max_new_tokens, learning_rate=learning_rate, steps=steps, temperature=temperature, beta=beta
    )
    with tempfile.TemporaryDirectory(prefix="trl-grpo-") as tmp:
        config = build_config(
            batch=batch,
            micro_steps=_micro_steps(batch, micro_batch_size),
            seed=seed,
            output_dir=output_dir or tmp,
            **settings,
        )
        trainer, timer = _train(model_dir, tokenizer, prompts, ground_truths, config)
    logs = step_logs(trainer.state.log_history)
    check_one_round_per_step(trainer, timer, logs, steps)
    run = {
        "model_dir": str(model_dir),
        "prompts": len(prompts),
        "n": n,
        "completions_per_step": batch,
        "max_prompt_length": max_prompt_length,
        "prompt_tokens": prompt_lengths,
        "max_new_tokens": max_new_tokens,
        "steps": steps,
        "threads": torch.get_num_threads(),
    }
    return _result(timer, logs, batch, run, config)


def _train(
    model_dir: str, tokenizer: Any, prompts: list[list[dict]], ground_truths: list[str], config: Any
) -> tuple[Any, StepTimer]:
    """TRL's trainer on the prompts (one dataset row each), timed, trained for ``config.max_steps`` steps."""
    from datasets import Dataset  # the slow imports (trl also imports vllm when installed) after the checks
    from trl import GRPOTrainer

    timer = StepTimer()
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=relay_grade_reward,
        args=config,
        train_dataset=Dataset.from_dict({"prompt": prompts, "ground_truth": ground_truths}),
        processing_class=tokenizer,
        callbacks=[timer.callback()],
    )
    batch = len(prompts) * config.num_generations
    if config.generation_batch_size != batch:
        raise AssertionError(f"generation batch {config.generation_batch_size} != len(prompts) * n = {batch}")
    wrap_phases(trainer, timer)
    quiet(trainer)
    trainer.train()
    return trainer, timer


def _result(timer: StepTimer, logs: list[dict[str, Any]], batch: int, run: dict, config: Any) -> dict:
    """The run's figures per step (time, phases, tokens, reward, loss, KL), its memory, versions and settings."""
    return {
        "seconds_per_step": timer.seconds,
        "phases": [
            {**phase, "train": seconds - phase["generate_and_score"]}
            for seconds, phase in zip(timer.seconds, timer.phases, strict=True)
        ],
        "completion_tokens": [round(entry["completions/mean_length"] * batch) for entry in logs],
        "rewards": [entry["reward"] for entry in logs],
        "losses": [entry.get("loss") for entry in logs],
        "kl": [entry.get("kl") for entry in logs],
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "versions": _versions(),
        "config": {
            **run,
            "reward": f"relay.scoring.grader.grade(format_score={FORMAT_SCORE})",
            "trl": _config_summary(config),
        },
    }


def gsm8k_prompts(count: int, path: Path = REPO_ROOT / "data/gsm8k/test.jsonl") -> tuple[list[list[dict]], list[str]]:
    """The first ``count`` GSM8K problems as Relay's chat messages and their ground truths."""
    from relay.data.gsm8k import build_messages, load_gsm8k

    examples = load_gsm8k(path)[:count]
    return [build_messages(e.question) for e in examples], [e.ground_truth for e in examples]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="HF checkpoint directory")
    parser.add_argument("--prompts", type=int, default=4, help="GSM8K test prompts per step (the first ones)")
    parser.add_argument("--n", type=int, default=4, help="completions per prompt")
    parser.add_argument("--max-prompt-length", type=int, default=256)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-6)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--beta", type=float, default=0.001)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    parser.add_argument("--micro-batch-size", type=int, default=None, help="sequences per forward/backward")
    args = parser.parse_args()

    prompts, truths = gsm8k_prompts(args.prompts)
    result = run_trl_grpo(
        args.model,
        prompts,
        truths,
        n=args.n,
        max_prompt_length=args.max_prompt_length,
        max_new_tokens=args.max_new_tokens,
        learning_rate=args.lr,
        steps=args.steps,
        temperature=args.temperature,
        beta=args.beta,
        seed=args.seed,
        threads=args.threads,
        micro_batch_size=args.micro_batch_size,
    )
    print(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
