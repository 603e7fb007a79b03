"""Numbers derived from the batch-size contract, and the problems they reveal.

Worked example (the README's): ``rollout.batch_size=16, rollout.n=2,
rollout.max_prompts_per_pass_per_process=4, learner.hosts=2, learner.devices_per_host=4,
train.per_device_micro_batch_size=1`` gives

- prompts per process: 16 / 2 hosts = 8, in ceil(8 / 4) = 2 passes of 4 prompts
  (4 prompts x 2 samples = 8 sequences per pass, divisible by the 4 local devices);
- ``local_batch`` = 8 prompts x 2 samples = 16 sequences per process per step;
- ``micro_batch_size`` = 1 per device x 4 devices = 4, so ``grad_accum_steps`` = 16 / 4 = 4.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Derived:
    process_count: int
    local_device_count: int
    sequences_global_per_step: int
    passes_per_step: int
    prompts_per_pass_per_process: int
    prompts_per_process: int
    effective_global_prompts: int
    local_batch: int
    micro_batch_size: int
    mini_batch_size: int
    local_mini_batch: int
    grad_accum_steps: int
    optimizer_steps_per_step: int
    total_optimizer_steps: int
    warmup_steps: int
    loss_scale_constant: float  # Dr.GRPO normaliser: algorithm.loss_scale_constant or data.max_response_length
    # Learner row width with train.packing: train.pack_width, or the longest possible sequence rounded up to
    # train.length_bucket (grad_accum_steps is then the most micro-batches a step can need: one sequence a row).
    pack_width: int
    # The learner computes the reference log-probs itself (see _reference_in_learner).
    reference_in_learner: bool
    # The dtype the learner's weights leave in for a weight sync (see _weight_sync_dtype).
    weight_sync_dtype: str

    def as_dict(self) -> dict[str, int | float | bool]:
        return asdict(self)


def _round_up(value: int, multiple: int) -> int:
    return -(-value // max(multiple, 1)) * max(multiple, 1)


def _smallest_fitting(prompts: int, n: int, devices: int) -> int:
    """Smallest ``p >= prompts`` with ``(p * n) % devices == 0``."""
    p = prompts
    while (p * n) % devices:
        p += 1
    return p


def _reference_in_learner(algorithm: Any, lora: Any) -> bool:
    """Whether the learner computes the reference log-probs itself (``algorithm.ref_log_prob_source``): ``learner``,
    or ``auto`` with LoRA (``lora``, the ``model.lora`` section, not None), when the KL loss is what reads them. The
    learner then holds a frozen copy of the initial weights (with LoRA: the base weights it already has, no copy).
    The KL penalty in the reward needs them before the update, so with ``use_kl_in_reward`` the actor_ref role
    computes them whatever the source says (and the learner reads the batch's). Any number of learner hosts: the
    reference forward is a program of its own before each optimizer step (relay/learner/reference_pass.py).

    Examples: KL loss on, ``learner`` -> True (one host or several); ``auto`` -> False in full fine-tuning, True
    with LoRA; any source with ``use_kl_in_reward`` -> False; ``actor_ref`` -> False; KL loss off -> False.
    """
    if not algorithm["use_kl_loss"] or algorithm["use_kl_in_reward"]:
        return False
    source = algorithm["ref_log_prob_source"]
    return source == "learner" or (source == "auto" and lora is not None)


def _weight_sync_dtype(rollout_dtype: str, compute_dtype: str, old_log_prob_source: str) -> str:
    """The dtype the learner casts its weights to, on its devices, before a sync sends them: the rollout engine's
    own (``rollout.dtype``), so a 16-bit engine is sent half the bytes and the cast is the one the engine would
    make (round to nearest even, in JAX as in torch). float32 instead when an actor copy
    (``algorithm.old_log_prob_source=actor``) must give the old log-probs of a learner whose forward runs on other
    weights than the engine's (``train.compute_dtype`` is not the engine's dtype): the copy reads the same bytes.

    Examples: bfloat16 engine, bfloat16 compute, any source -> bfloat16; float32 engine -> float32; bfloat16
    engine, float32 compute, ``actor`` -> float32; bfloat16 engine, float32 compute, ``rollout`` -> bfloat16.
    """
    if rollout_dtype == "float32":
        return "float32"
    if old_log_prob_source == "actor" and compute_dtype != rollout_dtype:
        return "float32"
    return rollout_dtype


def derive(cfg: Any) -> tuple[Derived, list[str], list[str]]:
    """``(derived, problems, warnings)`` for a merged config (problems make it unusable).

    In order: the passes and prompts per process, the mini- and micro-batch sizes, the optimizer steps and their
    warmup; each helper appends the problems it finds."""
    problems: list[str] = []
    r, t = cfg.rollout, cfg.train
    n, hosts, devices = r.n, max(cfg.learner.hosts, 1), max(cfg.learner.devices_per_host, 1)
    passes, per_pass = _passes(r, hosts, devices, problems)
    per_process = passes * per_pass
    effective = per_process * hosts
    warnings = _effective_prompts_warnings(r, effective, hosts, passes, per_pass, devices)
    local_batch = per_process * n
    _check_one_micro_batch_key(t, problems)
    mini = _mini_batch_size(t, effective, hosts, problems)
    local_mini = (mini // hosts) * n
    micro = _micro_batch_size(t, devices, local_mini)
    _check_micro_batch_size(micro, local_batch, local_mini, devices, problems)
    opt_steps = _optimizer_steps_per_step(cfg, effective, mini, problems)
    total_opt = opt_steps * cfg.trainer.total_training_steps
    derived = Derived(
        process_count=hosts,
        local_device_count=devices,
        sequences_global_per_step=r.batch_size * n,
        passes_per_step=passes,
        prompts_per_pass_per_process=per_pass,
        prompts_per_process=per_process,
        effective_global_prompts=effective,
        local_batch=local_batch,
        micro_batch_size=micro,
        mini_batch_size=mini,
        local_mini_batch=local_mini,
        grad_accum_steps=max(local_mini // max(micro, 1), 1),
        optimizer_steps_per_step=opt_steps,
        total_optimizer_steps=total_opt,
        warmup_steps=_warmup_steps(t.optimizer.lr_schedule, total_opt),
        loss_scale_constant=float(cfg.algorithm.loss_scale_constant or cfg.data.max_response_length),
        pack_width=t.pack_width
        or _round_up(cfg.data.max_prompt_length + cfg.data.max_response_length, t.length_bucket),
        reference_in_learner=_reference_in_learner(cfg.algorithm, cfg.model.get("lora")),
        weight_sync_dtype=_weight_sync_dtype(r.dtype, t.compute_dtype, cfg.algorithm.old_log_prob_source),
    )
    return derived, problems, warnings + _reference_source_warnings(cfg.algorithm)


def _passes(r: Any, hosts: int, devices: int, problems: list[str]) -> tuple[int, int]:
    """``(passes, prompts per pass)`` of one process: its share of ``rollout.batch_size`` in the fewest passes of at
    most ``rollout.max_prompts_per_pass_per_process`` prompts (unset: one pass), each pass's prompts x
    ``rollout.n`` divisible by the local devices."""
    target = math.ceil(max(r.batch_size, 1) / hosts)
    if r.max_prompts_per_pass_per_process is None or r.max_prompts_per_pass_per_process < 1:
        return 1, _smallest_fitting(target, r.n, devices)
    passes = math.ceil(target / r.max_prompts_per_pass_per_process)
    per_pass = _smallest_fitting(math.ceil(target / passes), r.n, devices)
    if per_pass > r.max_prompts_per_pass_per_process:
        problems.append(
            f"rollout.max_prompts_per_pass_per_process={r.max_prompts_per_pass_per_process}: a pass needs "
            f"{per_pass} prompts so that prompts x rollout.n ({r.n}) divides by the {devices} local devices; "
            f"raise it to {per_pass}"
        )
    return passes, per_pass


def _effective_prompts_warnings(
    r: Any, effective: int, hosts: int, passes: int, per_pass: int, devices: int
) -> list[str]:
    """A warning when the prompts per step differ from ``rollout.batch_size`` (rounded up to equal shapes)."""
    if effective == r.batch_size:
        return []
    return [
        f"rollout.batch_size={r.batch_size} becomes {effective} prompts per step (+{effective - r.batch_size}): "
        f"{hosts} learner process(es) x {passes} pass(es) x {per_pass} prompts, so that every process has the "
        f"same shapes and prompts x rollout.n divides by learner.devices_per_host={devices}"
    ]


def _check_one_micro_batch_key(t: Any, problems: list[str]) -> None:
    """``train.micro_batch_size`` and ``train.per_device_micro_batch_size`` say one thing: at most one is set."""
    if t.micro_batch_size is not None and t.per_device_micro_batch_size is not None:
        problems.append(
            f"train.micro_batch_size={t.micro_batch_size} and train.per_device_micro_batch_size="
            f"{t.per_device_micro_batch_size} are both set; set only one"
        )


def _mini_batch_size(t: Any, effective: int, hosts: int, problems: list[str]) -> int:
    """Prompts per optimizer step: ``train.mini_batch_size`` (default: every prompt of the step), which must divide
    the step's prompts (else the whole step is used) and split evenly over the learner processes."""
    mini = t.mini_batch_size if t.mini_batch_size is not None else effective
    if mini < 1 or effective % mini:
        problems.append(
            f"train.mini_batch_size={mini} must divide derived.effective_global_prompts={effective} "
            f"(prompts per step); valid values: {[d for d in range(1, effective + 1) if effective % d == 0]}"
        )
        mini = effective
    if mini % hosts:
        problems.append(f"train.mini_batch_size={mini} must divide by learner.hosts={hosts}")
    return mini


def _micro_batch_size(t: Any, devices: int, local_mini: int) -> int:
    """Sequences per process per forward/backward: ``train.per_device_micro_batch_size`` x the local devices, or
    ``train.micro_batch_size``, or by default a whole mini-batch (one micro step per optimizer step)."""
    if t.per_device_micro_batch_size is not None:
        return t.per_device_micro_batch_size * devices
    if t.micro_batch_size is not None:
        return t.micro_batch_size
    return local_mini


def _check_micro_batch_size(micro: int, local_batch: int, local_mini: int, devices: int, problems: list[str]) -> None:
    """The micro-batch must divide the process's batch and mini-batch, and split evenly over its devices."""
    if micro < 1 or local_batch % micro:
        problems.append(f"train.micro_batch_size={micro} must divide derived.local_batch={local_batch}")
    elif local_mini % micro:
        problems.append(
            f"train.micro_batch_size={micro} must divide derived.local_mini_batch={local_mini} "
            "(sequences per process per optimizer step)"
        )
    if micro >= 1 and micro % devices:
        problems.append(
            f"train.micro_batch_size={micro} must divide by learner.devices_per_host={devices} "
            "(each device gets the same share)"
        )


def _optimizer_steps_per_step(cfg: Any, effective: int, mini: int, problems: list[str]) -> int:
    """``train.ppo_epochs`` x mini-batches per step. More than one with the learner's own old log-probs is a
    problem: after the first optimizer step they are no longer the old policy's."""
    opt_steps = cfg.train.ppo_epochs * (effective // mini)
    if opt_steps > 1 and cfg.algorithm.old_log_prob_source == "learner":
        problems.append(
            f"{opt_steps} optimizer steps per training step (train.ppo_epochs x prompts / train.mini_batch_size) "
            "with algorithm.old_log_prob_source=learner: after the first optimizer step the learner's log-probs "
            "are no longer the old policy's; set algorithm.old_log_prob_source=actor (or rollout)"
        )
    return opt_steps


def _warmup_steps(schedule: Any, total_optimizer_steps: int) -> int:
    """``lr_schedule.warmup_steps``, else ``warmup_ratio`` of the run's optimizer steps, rounded."""
    if schedule.warmup_steps is not None:
        return schedule.warmup_steps
    return round(total_optimizer_steps * schedule.warmup_ratio)


def _reference_source_warnings(alg: Any) -> list[str]:
    """A warning when ``ref_log_prob_source=learner`` cannot hold: the KL penalty in the reward reads the
    reference log-probs before the update, so the actor_ref role computes them."""
    if not (alg.ref_log_prob_source == "learner" and alg.use_kl_in_reward):
        return []
    return [
        "algorithm.ref_log_prob_source=learner with algorithm.use_kl_in_reward=true: the reward needs the "
        "reference log-probs before the update, so the actor_ref role computes them (set ref_log_prob_source="
        "actor_ref or auto to say so)"
    ]
