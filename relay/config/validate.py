"""Range and consistency checks on a merged config; each problem names key, value and a fix.

``validate`` is what any config must pass (``--print-config`` included); ``unsupported`` lists
settings that are valid but that this build cannot run yet, checked by ``trainer.py`` before Ray.

The ``algorithm`` section's checks are :mod:`relay.config.validate_algorithm`'s; where the roles run (the learner's
mesh, the roles' reservations, ``placement`` and ``cluster``) is checked by :mod:`relay.config.validate_placement`.
The names of the menus (optimizers, learning-rate schedules here; the algorithm's there) are read from the code's
registries when a config is validated, so a newly registered one is valid config. Those modules are imported inside
the checks, not at module level: importing ``relay.config`` stays free of JAX.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import OmegaConf

from relay.config.checks import at_least, choice, positive
from relay.config.validate_agent import check_agent
from relay.config.validate_algorithm import check_algorithm
from relay.config.validate_placement import check_mesh, check_placement, check_resources
from relay.config.validate_reward_model import check_reward_model
from relay.models.lora_spec import LoraSpec

ENGINES = ("hf", "vllm")
REWARD_MODES = ("rule", "function", "solver")
ACCELERATORS = ("cpu", "gpu", "tpu")
TRUNCATIONS = ("error", "left", "right")
WEIGHT_SYNC_MODES = ("auto", "shared_memory", "object_store")


def _lora(p: list[str], lora: Any) -> None:
    """``model.lora``: what :class:`relay.models.lora_spec.LoraSpec` refuses (rank, modules, dropout)."""
    if lora is None:
        return
    try:
        LoraSpec.from_config(lora)
    except ValueError as exc:
        p.append(str(exc))
    if not lora.alpha > 0:
        p.append(f"model.lora.alpha={lora.alpha}: must be > 0 (the adapter's scaling is alpha / rank)")


def _rollout(p: list[str], r: Any, sft: bool = False) -> None:
    choice(p, "rollout.engine", r.engine, ENGINES)
    at_least(p, "rollout.batch_size", r.batch_size, 1)
    if r.n < 2 and not sft:  # a warm start's step is traces, one response each (_sft)
        p.append(f"rollout.n={r.n}: GRPO needs at least 2 samples per prompt (the group baseline); set rollout.n>=2")
    at_least(p, "rollout.max_prompts_per_pass_per_process", r.max_prompts_per_pass_per_process, 1)
    if r.temperature <= 0:
        p.append(f"rollout.temperature={r.temperature}: must be > 0 (log-probs are computed at that temperature)")
    if not 0 < r.top_p <= 1:
        p.append(f"rollout.top_p={r.top_p}: must be in (0, 1]")
    if r.top_k == 0 or r.top_k < -1:
        p.append(f"rollout.top_k={r.top_k}: must be -1 (off) or >= 1")
    at_least(p, "rollout.replicas", r.replicas, 1)
    at_least(p, "rollout.gpus_per_replica", r.gpus_per_replica, 0)
    at_least(p, "rollout.tensor_parallel_size", r.tensor_parallel_size, 1)
    if r.gpus_per_replica and r.gpus_per_replica != r.tensor_parallel_size:
        p.append(
            f"rollout.gpus_per_replica={r.gpus_per_replica} but rollout.tensor_parallel_size={r.tensor_parallel_size}: "
            "a GPU replica shards over exactly its GPUs; make them equal"
        )
    choice(p, "rollout.dtype", r.dtype, ("float32", "bfloat16", "float16"))
    if isinstance(r.kv_cache_gib, str):
        if r.kv_cache_gib != "auto":
            p.append(
                f"rollout.kv_cache_gib={r.kv_cache_gib!r}: must be a number of GiB > 0, 'auto' (what one pass of "
                "the step needs) or null (the memory fraction)"
            )
    elif r.kv_cache_gib is not None and r.kv_cache_gib <= 0:
        p.append(f"rollout.kv_cache_gib={r.kv_cache_gib}: must be > 0, 'auto' or null (the memory fraction)")
    if not 0 < r.gpu_memory_utilization <= 1:
        p.append(f"rollout.gpu_memory_utilization={r.gpu_memory_utilization}: must be in (0, 1]")


def _data(p: list[str], d: Any) -> None:
    from relay.data.gsm8k import PROMPT_TEMPLATES
    from relay.tasks.registry import TASKS

    choice(p, "data.prompt_template", d.prompt_template, tuple(PROMPT_TEMPLATES))
    choice(p, "data.task", d.task, tuple(TASKS))
    for value, task in d.sources.items():
        choice(p, f"data.sources.{value}", task, tuple(TASKS))
    if d.user_template is not None and "{prompt}" not in d.user_template:
        p.append(f"data.user_template={d.user_template!r}: has no {{prompt}}, where each row's problem goes")
    generated = d.task in TASKS and TASKS[d.task].generate is not None
    for split in ("train", "test"):
        if getattr(d, f"{split}_path") is None and not generated:
            p.append(f"data.{split}_path is null but data.task={d.task} reads files: set it to a dataset file")
    at_least(p, "data.generate.train_size", d.generate.train_size, 1)
    at_least(p, "data.generate.test_size", d.generate.test_size, 1)
    reads_generated = d.train_path is None or d.test_path is None
    if generated and reads_generated and TASKS[d.task].check_generate is not None:
        p.extend(TASKS[d.task].check_generate(d.generate))
    at_least(p, "data.max_prompt_length", d.max_prompt_length, 1)
    at_least(p, "data.max_response_length", d.max_response_length, 1)
    at_least(p, "data.min_padded_prompt_length", d.min_padded_prompt_length, 0)
    choice(p, "data.truncation", d.truncation, TRUNCATIONS)
    at_least(p, "data.max_prompt_chars", d.max_prompt_chars, 0)


def _curriculum(p: list[str], cfg: Any) -> None:
    """``data.curriculum``: levels of a generated task, each a unique name and generator options its task accepts;
    a promotion threshold in [0, 1], a window >= 1; the on-policy loop (the next step's level follows this one's
    accuracy)."""
    from relay.tasks.registry import TASKS

    c, d = cfg.data.curriculum, cfg.data
    if not c.levels:
        return
    task = TASKS.get(d.task)
    if task is None or task.generate is None or d.train_path is not None:
        p.append(
            f"data.curriculum.levels: a curriculum raises a generated task's difficulty, but data.task={d.task} "
            f"reads data.train_path={d.train_path}; use a generated task (countdown, reasoning_gym) with null paths"
        )
        return
    names = []
    for i, level in enumerate(c.levels):
        key = f"data.curriculum.levels[{i}]"
        if not isinstance(level, Mapping) or not level.get("name") or not isinstance(level.get("options"), Mapping):
            p.append(f"{key}={level!r}: needs a name and options (the level's generator options)")
            continue
        names.append(str(level["name"]))
        if task.check_generate is not None:
            options = OmegaConf.to_container(level["options"], resolve=True)
            level_generate = OmegaConf.create({**OmegaConf.to_container(d.generate, resolve=True), "options": options})
            for problem in task.check_generate(level_generate):
                p.append(problem.replace("data.generate.options", f"{key}.options"))
    if len(set(names)) < len(names):
        p.append(f"data.curriculum.levels: names {names} repeat; give each level its own name")
    if not 0 <= c.promote_at <= 1:
        p.append(f"data.curriculum.promote_at={c.promote_at}: must be in [0, 1] (a training accuracy; 0: a schedule)")
    at_least(p, "data.curriculum.window", c.window, 1)
    if cfg.trainer.max_staleness:
        p.append(
            f"trainer.max_staleness={cfg.trainer.max_staleness} with data.curriculum: the next step's level follows "
            "this step's accuracy; set trainer.max_staleness=0"
        )


def _revisit_unsolved(p: list[str], cfg: Any) -> None:
    """``data.revisit_unsolved``: a share in (0, 1], a delay and visits >= 1, a capacity >= 0, in a run that grades
    its prompts (not a warm start)."""
    r = cfg.data.revisit_unsolved
    if not 0 < r.share <= 1:
        p.append(f"data.revisit_unsolved.share={r.share}: must be in (0, 1] (the most of a step's prompts revisited)")
    at_least(p, "data.revisit_unsolved.delay", r.delay, 1)
    at_least(p, "data.revisit_unsolved.times", r.times, 1)
    at_least(p, "data.revisit_unsolved.capacity", r.capacity, 0)
    if r.enable and cfg.sft.enable:
        p.append("data.revisit_unsolved.enable=true with sft.enable=true: a warm start grades nothing; set it false")


SFT_TRACES = ("gsm8k_tools", "gsm8k_plain", "worked_sums", "worked_sums_placed")


def _sft(p: list[str], cfg: Any) -> None:
    """``sft``: known traces, sizes >= 1, and a step of whole traces (``rollout.n=1``)."""
    s = cfg.sft
    choice(p, "sft.traces", s.traces, SFT_TRACES)
    at_least(p, "sft.val_size", s.val_size, 1)
    if s.train_size is not None:
        at_least(p, "sft.train_size", s.train_size, 1)
    if s.enable and cfg.trainer.max_staleness:
        p.append(
            f"trainer.max_staleness={cfg.trainer.max_staleness} with sft.enable=true: a warm start has no rollout to "
            "run ahead; set trainer.max_staleness=0"
        )
    if s.enable and s.traces.startswith("worked_sums") and cfg.data.curriculum.levels:
        p.append(
            f"sft.traces={s.traces} with data.curriculum.levels: the worked sums come from data.generate's rows; "
            "warm-start on one level's settings (data.generate.options), then run the curriculum from its export"
        )
    if s.enable and cfg.rollout.n != 1:
        p.append(
            f"rollout.n={cfg.rollout.n} with sft.enable=true: a warm-start step is rollout.batch_size traces, one "
            "response each; set rollout.n=1"
        )


def _grader(p: list[str], d: Any, rw: Any) -> None:
    """``reward.grader`` / ``reward.grader_options``: a known grader given only the options it takes (math-verify is
    imported only when one is set)."""
    from relay.tasks.registry import TASKS

    if (rw.grader is None and not rw.grader_options) or d.task not in TASKS:
        return
    from relay.scoring.graders import check_grader

    p.extend(check_grader(rw.grader or TASKS[d.task].grader, rw.grader_options))


def _reward(p: list[str], rw: Any) -> None:
    choice(p, "reward.mode", rw.mode, REWARD_MODES)
    if rw.mode == "function" and not rw.function:
        p.append("reward.function is empty but reward.mode=function: set reward.function=package.module:callable")
    if rw.function and ":" not in rw.function:
        p.append(f"reward.function={rw.function!r}: expected 'package.module:callable'")
    at_least(p, "reward.workers", rw.workers, 0)
    positive(p, "reward.timeout_s", rw.timeout_s)
    positive(p, "reward.item_timeout_s", rw.item_timeout_s)
    if rw.item_timeout_s > rw.timeout_s:
        p.append(
            f"reward.item_timeout_s={rw.item_timeout_s} > reward.timeout_s={rw.timeout_s}: the per-item timer "
            "must fit inside the call's backstop; lower it or raise reward.timeout_s"
        )
    at_least(p, "reward.gpus", rw.gpus, 0)
    _solver(p, rw)
    for i, entry in enumerate(rw.blocklist):
        if not entry:
            p.append(
                f"reward.blocklist[{i}]={entry!r}: an empty substring is in every response and would zero every "
                "reward; remove it"
            )


def _overlong_buffer(p: list[str], rw: Any, max_response_length: int) -> None:
    ob = rw.overlong_buffer
    if not ob.enable:
        return
    if not 1 <= ob.length <= max_response_length:
        p.append(
            f"reward.overlong_buffer.length={ob.length}: must be in [1, data.max_response_length="
            f"{max_response_length}] (the penalty grows over the last `length` tokens of the response budget); "
            "e.g. a quarter of the budget"
        )
    at_least(p, "reward.overlong_buffer.penalty_factor", ob.penalty_factor, 0.0)


def _solver(p: list[str], rw: Any) -> None:
    choice(p, "reward.solver_engine", rw.solver_engine, ENGINES)
    at_least(p, "reward.solver_n", rw.solver_n, 1)
    at_least(p, "reward.solver_max_new_tokens", rw.solver_max_new_tokens, 1)
    at_least(p, "reward.solver_max_prompt_length", rw.solver_max_prompt_length, 16)
    at_least(p, "reward.solver_temperature", rw.solver_temperature, 0.0)
    if rw.solver_temperature == 0 and rw.solver_n > 1:
        p.append(
            f"reward.solver_n={rw.solver_n} with reward.solver_temperature=0: greedy samples are all the same; "
            "set reward.solver_temperature>0 (e.g. 0.7) or reward.solver_n=1"
        )
    if not 0 < rw.solver_top_p <= 1:
        p.append(f"reward.solver_top_p={rw.solver_top_p}: must be in (0, 1]")
    if rw.solver_kv_cache_gib is not None and rw.solver_kv_cache_gib <= 0:
        p.append(f"reward.solver_kv_cache_gib={rw.solver_kv_cache_gib}: must be > 0 (or null for the memory fraction)")
    if not 0 < rw.solver_gpu_memory_utilization <= 1:
        p.append(f"reward.solver_gpu_memory_utilization={rw.solver_gpu_memory_utilization}: must be in (0, 1]")
    choice(p, "reward.solver_dtype", rw.solver_dtype, ("float32", "bfloat16", "float16"))
    if rw.solver_prompt_template is not None:
        from relay.scoring.solver_prompt import template_problems  # imports math-verify: only when needed

        for problem in template_problems(rw.solver_prompt_template):
            p.append(f"reward.solver_prompt_template={rw.solver_prompt_template!r}: {problem}")


def _train(p: list[str], t: Any, data: Any) -> None:
    from relay.learner.optimizer import LR_SCHEDULES, OPTIMIZERS
    from relay.models.attention_choice import ATTENTION_SETTINGS

    at_least(p, "train.micro_batch_size", t.micro_batch_size, 1)
    at_least(p, "train.per_device_micro_batch_size", t.per_device_micro_batch_size, 1)
    at_least(p, "train.mini_batch_size", t.mini_batch_size, 1)
    at_least(p, "train.length_bucket", t.length_bucket, 1)
    choice(p, "train.compute_dtype", t.compute_dtype, ("float32", "bfloat16"))
    choice(p, "train.attention", t.attention, ATTENTION_SETTINGS)
    if t.pack_width is not None:
        at_least(p, "train.pack_width", t.pack_width, 1)
        longest = data.max_prompt_length + data.max_response_length
        if t.packing and t.pack_width < longest:
            p.append(
                f"train.pack_width={t.pack_width} is shorter than the longest sequence, data.max_prompt_length + "
                f"data.max_response_length = {longest}; set train.pack_width >= {longest} or leave it null"
            )
    o = t.optimizer
    choice(p, "train.optimizer.name", o.name, tuple(OPTIMIZERS))
    positive(p, "train.optimizer.clip_norm", o.clip_norm)
    at_least(p, "train.optimizer.weight_decay", o.weight_decay, 0.0)
    s = o.lr_schedule
    choice(p, "train.optimizer.lr_schedule.type", s.type, tuple(LR_SCHEDULES))
    positive(p, "train.optimizer.lr_schedule.peak_value", s.peak_value)
    if not 0 <= s.warmup_ratio < 1:
        p.append(f"train.optimizer.lr_schedule.warmup_ratio={s.warmup_ratio}: must be in [0, 1)")
    at_least(p, "train.optimizer.lr_schedule.warmup_steps", s.warmup_steps, 0)


def _staleness(p: list[str], cfg: Any) -> None:
    choice(p, "trainer.weight_sync", cfg.trainer.weight_sync, WEIGHT_SYNC_MODES)
    k = cfg.trainer.max_staleness
    at_least(p, "trainer.max_staleness", k, 0)
    if k < 1:
        return
    if cfg.algorithm.old_log_prob_source == "actor":
        p.append(
            f"trainer.max_staleness={k} with algorithm.old_log_prob_source=actor: the actor copy would compute old "
            "log-probs for samples of an older policy than the one it holds; set algorithm.old_log_prob_source="
            "learner (the learner's log-probs at update time; add algorithm.rollout_is=tis to correct the rollout's "
            "staleness), rollout (the sampler's log-probs: the clipped ratio itself is against the sampler) or "
            "trainer.max_staleness=0"
        )
    if cfg.rollout.sleep_during_update:
        p.append(
            f"trainer.max_staleness={k} with rollout.sleep_during_update=true: the rollout samples during the "
            "update in a pipeline, it cannot sleep then; set one of them off"
        )


def validate(cfg: Any) -> list[str]:
    """All problems found in ``cfg`` (empty when it is usable)."""
    from relay.models.attention_choice import cudnn_problem

    p: list[str] = []
    _lora(p, cfg.model.lora)
    _rollout(p, cfg.rollout, bool(cfg.sft.enable))
    check_agent(p, cfg)
    _data(p, cfg.data)
    _reward(p, cfg.reward)
    check_reward_model(p, cfg)
    _grader(p, cfg.data, cfg.reward)
    _sft(p, cfg)
    _curriculum(p, cfg)
    _revisit_unsolved(p, cfg)
    _overlong_buffer(p, cfg.reward, cfg.data.max_response_length)
    check_algorithm(p, cfg.algorithm, cfg.train)
    _train(p, cfg.train, cfg.data)
    at_least(p, "actor_ref.micro_batch_size", cfg.actor_ref.micro_batch_size, 1)
    at_least(p, "actor_ref.gpus", cfg.actor_ref.gpus, 0)
    lr = cfg.learner
    choice(p, "learner.accelerator", lr.accelerator, ACCELERATORS)
    cudnn = cudnn_problem(cfg.train.attention, lr.accelerator, cfg.train.compute_dtype)
    if cudnn:
        p.append(cudnn)
    at_least(p, "learner.hosts", lr.hosts, 1)
    at_least(p, "learner.devices_per_host", lr.devices_per_host, 1)
    if lr.collective_timeout_s is not None:
        positive(p, "learner.collective_timeout_s", lr.collective_timeout_s)
    check_mesh(p, lr)
    check_resources(p, cfg)
    tr = cfg.trainer
    at_least(p, "trainer.total_training_steps", tr.total_training_steps, 1)
    at_least(p, "trainer.total_epochs", tr.total_epochs, 1)
    if tr.time_budget_minutes is not None and not tr.time_budget_minutes > 0:
        p.append(f"trainer.time_budget_minutes={tr.time_budget_minutes}: must be > 0 minutes, or null for no budget")
    at_least(p, "trainer.keep_checkpoints", tr.keep_checkpoints, 0)
    _staleness(p, cfg)
    at_least(p, "trainer.role_restarts", tr.role_restarts, 0)
    positive(p, "trainer.role_restart_timeout_s", tr.role_restart_timeout_s)
    if tr.role_call_timeout_s is not None:
        positive(p, "trainer.role_call_timeout_s", tr.role_call_timeout_s)
    if tr.ray_init_timeout_s is not None:
        positive(p, "trainer.ray_init_timeout_s", tr.ray_init_timeout_s)
    at_least(p, "trainer.val_samples", tr.val_samples, 1)
    at_least(p, "trainer.val_k", tr.val_k, 0)
    at_least(p, "train.max_consecutive_skips", cfg.train.max_consecutive_skips, 1)
    check_placement(p, cfg)
    return p


def unsupported(cfg: Any) -> list[str]:
    """Valid settings this build cannot run yet, each with what to set instead."""
    u: list[str] = []
    if cfg.rollout.tensor_parallel_size != 1:
        u.append(
            f"rollout.tensor_parallel_size={cfg.rollout.tensor_parallel_size}: the in-process weight sync is built "
            "for one engine process per replica; use rollout.replicas to scale and set tensor_parallel_size=1"
        )
    if cfg.rollout.sleep_during_update and (cfg.rollout.engine != "vllm" or not cfg.rollout.gpus_per_replica):
        u.append("rollout.sleep_during_update=true: vLLM's sleep mode needs the vllm engine on a GPU; set false")
    if cfg.trainer.max_staleness > 0 and cfg.trainer.total_epochs is not None:
        u.append(
            f"trainer.total_epochs={cfg.trainer.total_epochs} with trainer.max_staleness={cfg.trainer.max_staleness}: "
            "the pipeline's data cursor runs ahead of the step; bound the run with trainer.total_training_steps"
        )
    rw = cfg.reward
    if rw.mode == "solver" and rw.gpus > 1:
        u.append(f"reward.gpus={rw.gpus}: the solver engine runs on one GPU (no tensor parallelism); set reward.gpus=1")
    if rw.mode == "solver" and not rw.gpus and cfg.rollout.gpus_per_replica:
        u.append(
            "reward.mode=solver with reward.gpus=0 on a GPU cluster: the solver engine would run on the CPU "
            "(vLLM's GPU build has no CPU backend); set reward.gpus=1"
        )
    return u
