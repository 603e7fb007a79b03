"""Where config values come from besides presets: environment variables, and keys that moved."""

from __future__ import annotations

# Environment variable -> config key. Precedence: default < preset < environment < --set.
ENV_OVERRIDES: dict[str, str] = {
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
    "RELAY_RUN_NAME": "trainer.run_name",  # set by submit.py for a ray job submit run
}

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
