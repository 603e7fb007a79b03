"""Where config values come from besides presets: environment variables, and keys that moved."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# Short variable names users bring from their own GRPO launch scripts (Relay ships none) -> config key. Each is
# also read with the ``RELAY_`` prefix (``RELAY_STEPS``), which wins when both spellings are set.
# Precedence: default < preset < environment < --set.
RUNNER_ENV: dict[str, str] = {
    "MODEL_PATH": "model.path",
    "STEPS": "trainer.total_training_steps",
    "BATCH_SIZE": "rollout.batch_size",
    "NUM_PRE_Q": "rollout.n",
    "MAX_LENGTH_SAMPLE": "data.max_response_length",
    "GLOBAL_LENGTH": "data.min_padded_prompt_length",
    "PPO_EPOCHS": "train.ppo_epochs",
    "BETA": "algorithm.kl_loss_coef",
    "LEARNING_RATE": "train.optimizer.lr_schedule.peak_value",
    "TRAIN_MICRO_BATCH_SIZE": "train.micro_batch_size",
    "TRAIN_PER_DEVICE_MICRO_BATCH_SIZE": "train.per_device_micro_batch_size",
}
RELAY_PREFIX = "RELAY_"
# Every variable read, prefixed spellings first. RELAY_RUN_NAME is set by submit.py for a ray job submit run;
# RELAY_ROLLOUT_ENGINE picks the rollout engine for every trainer a script or a shell starts (``hf`` where vLLM's
# start, ~17 CPU-seconds on a 2-core VM, is not what is being run).
ENV_OVERRIDES: dict[str, str] = {
    **{RELAY_PREFIX + name: key for name, key in RUNNER_ENV.items()},
    **RUNNER_ENV,
    "RELAY_RUN_NAME": "trainer.run_name",
    "RELAY_ROLLOUT_ENGINE": "rollout.engine",
}


@dataclass(frozen=True)
class EnvOverride:
    """One environment variable applied to the config (``ignored``: the other spelling of the same key, shadowed)."""

    var: str
    key: str
    value: str
    ignored: str | None = None

    def describe(self) -> str:
        """``STEPS=5 -> trainer.total_training_steps`` (and the shadowed spelling, if any)."""
        shadowed = f" ({self.ignored} ignored: the {RELAY_PREFIX} spelling wins)" if self.ignored else ""
        return f"{self.var}={self.value} -> {self.key}{shadowed}"


def env_overrides(environ: Mapping[str, str]) -> list[EnvOverride]:
    """The overrides ``environ`` applies, one per config key, in :data:`ENV_OVERRIDES` order.

    >>> for override in env_overrides({"STEPS": "5", "RELAY_STEPS": "7", "BETA": "0.1"}):
    ...     print(override.describe())
    RELAY_STEPS=7 -> trainer.total_training_steps (STEPS ignored: the RELAY_ spelling wins)
    BETA=0.1 -> algorithm.kl_loss_coef
    """
    applied: dict[str, EnvOverride] = {}
    for var, key in ENV_OVERRIDES.items():
        if var not in environ:
            continue
        if key in applied:  # the RELAY_ spelling came first and wins
            applied[key] = EnvOverride(applied[key].var, key, applied[key].value, ignored=var)
        else:
            applied[key] = EnvOverride(var, key, environ[var])
    return list(applied.values())


# Keys that are refused, with what to write instead.
LEGACY_KEYS: dict[str, str] = {
    "rollout.global_prompt_batch_size": "write rollout.batch_size (it is the global prompts per step)",
    "rollout.prompt_batch_size": (
        "per-process prompts are derived: write rollout.batch_size (global prompts per step) and learner.hosts, "
        "and rollout.max_prompts_per_pass_per_process to split a step into passes"
    ),
    "rollout.per_device_batch_size": "write train.per_device_micro_batch_size (sequences per device per micro step)",
    "rollout.max_response_length": "write data.max_response_length",
    "learner.micro_batch_size": "write train.micro_batch_size",
    "learner.ppo_epochs": "write train.ppo_epochs",
    "learner.lr": "write train.optimizer.lr_schedule.peak_value",
    "learner.length_bucket": "write train.length_bucket",
    "trainer.steps": "write trainer.total_training_steps",
    "model.lora.reference": "write algorithm.ref_log_prob_source (learner | actor_ref | auto; any fine-tuning)",
}
