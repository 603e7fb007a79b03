"""What the TRL baselines share (the step timing of :mod:`benchmarks.speed.trl_grpo` and the wall-clock run of
:mod:`benchmarks.learning.trl_baseline`): the ``GRPOConfig`` with Relay's optimizer and objective on the CPU in fp32,
and the text of a completion TRL hands a reward function."""

from __future__ import annotations

from typing import Any


def completion_text(completion: str | list[dict[str, Any]]) -> str:
    """The text of one completion: a plain string, or the assistant messages of a conversational one."""
    if isinstance(completion, str):
        return completion
    parts = []
    for message in completion:
        content = message.get("content") or ""
        if isinstance(content, list):  # content blocks: [{"type": "text", "text": ...}, ...]
            content = "".join(block.get("text", "") for block in content if block.get("type") == "text")
        parts.append(content)
    return "".join(parts)


# The settings every TRL run here shares: fp32 on the CPU, TRL's own sampler, Relay's optimizer and objective.
CPU_FP32 = {
    "use_cpu": True,
    "bf16": False,
    "fp16": False,
    "model_init_kwargs": {"dtype": "float32"},
    "gradient_checkpointing": False,
    "disable_dropout": True,
    "use_vllm": False,
}
OBJECTIVE = {"use_bias_correction_kl": False, "loss_type": "dapo", "epsilon": 0.2, "scale_rewards": "group"}
OPTIMIZER = {
    "lr_scheduler_type": "constant",
    "warmup_steps": 0,
    "optim": "adamw_torch",
    "adam_beta1": 0.9,
    "adam_beta2": 0.999,
    "adam_epsilon": 1e-8,
    "weight_decay": 0.0,
    "max_grad_norm": 1.0,
}
BOOKKEEPING = {
    "report_to": [],
    "logging_steps": 1,
    "save_strategy": "no",
    "dataloader_num_workers": 0,
    "disable_tqdm": True,
}


def build_config(
    *,
    batch: int,
    micro_steps: int,
    n: int,
    max_new_tokens: int,
    learning_rate: float,
    steps: int,
    temperature: float,
    beta: float,
    seed: int,
    output_dir: str,
) -> Any:
    """A CPU/fp32 GRPOConfig with one generation round of ``batch`` completions per optimizer step."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=output_dir,
        **CPU_FP32,
        # one generation round and one optimizer step per trainer step
        num_generations=n,
        per_device_train_batch_size=batch // micro_steps,
        gradient_accumulation_steps=micro_steps,
        steps_per_generation=micro_steps,
        num_iterations=1,
        shuffle_dataset=False,
        max_steps=steps,
        # sampling
        max_completion_length=max_new_tokens,
        temperature=temperature,
        top_p=1.0,
        top_k=0,
        beta=beta,
        learning_rate=learning_rate,
        **OBJECTIVE,
        **OPTIMIZER,
        seed=seed,
        data_seed=seed,
        **BOOKKEEPING,
    )
