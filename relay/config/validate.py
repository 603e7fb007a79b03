"""Range and consistency checks on a merged config; each problem names key, value and a fix."""

from __future__ import annotations

from typing import Any

ENGINES = ("hf",)
REWARD_MODES = ("rule", "function")
KL_TYPES = ("k1", "k2", "k3", "low_var_kl")
OLD_LOG_PROB_SOURCES = ("learner", "actor")
ACCELERATORS = ("cpu", "gpu", "tpu")
STRATEGIES = ("PACK", "STRICT_PACK", "SPREAD", "STRICT_SPREAD")
ADV_ESTIMATORS = ("grpo",)


def _choice(problems: list[str], key: str, value: Any, allowed: tuple) -> None:
    if value not in allowed:
        problems.append(f"{key}={value!r}: must be one of {', '.join(map(str, allowed))}")


def _at_least(problems: list[str], key: str, value: float, low: float) -> None:
    if value < low:
        problems.append(f"{key}={value}: must be >= {low}")


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def validate(cfg: Any) -> list[str]:
    """All problems found in ``cfg`` (empty when it is usable)."""
    p: list[str] = []
    r, lr, alg = cfg.rollout, cfg.learner, cfg.algorithm
    _choice(p, "rollout.engine", r.engine, ENGINES)
    _at_least(p, "rollout.batch_size", r.batch_size, 1)
    if r.n < 2:
        p.append(
            f"rollout.n={r.n}: GRPO needs at least 2 samples per prompt (the group baseline); "
            "set rollout.n>=2"
        )
    _at_least(p, "rollout.max_response_length", r.max_response_length, 1)
    if r.temperature <= 0:
        p.append(
            f"rollout.temperature={r.temperature}: must be > 0 (log-probs are computed at that temperature)"
        )
    if not 0 < r.top_p <= 1:
        p.append(f"rollout.top_p={r.top_p}: must be in (0, 1]")
    if r.top_k == 0 or r.top_k < -1:
        p.append(f"rollout.top_k={r.top_k}: must be -1 (off) or >= 1")
    if r.replicas != 1:
        p.append(
            f"rollout.replicas={r.replicas}: only 1 rollout replica is supported yet; set rollout.replicas=1"
        )
    _at_least(p, "actor_ref.micro_batch_size", cfg.actor_ref.micro_batch_size, 1)
    _at_least(p, "data.max_prompt_length", cfg.data.max_prompt_length, 1)

    rw = cfg.reward
    _choice(p, "reward.mode", rw.mode, REWARD_MODES)
    if rw.mode == "function" and not rw.function:
        p.append(
            "reward.function is empty but reward.mode=function: set reward.function=package.module:callable"
        )
    if rw.function and ":" not in rw.function:
        p.append(f"reward.function={rw.function!r}: expected 'package.module:callable'")
    _at_least(p, "reward.workers", rw.workers, 0)
    if rw.timeout_s <= 0:
        p.append(f"reward.timeout_s={rw.timeout_s}: must be > 0")

    _choice(p, "algorithm.adv_estimator", alg.adv_estimator, ADV_ESTIMATORS)
    _choice(p, "algorithm.kl_loss_type", alg.kl_loss_type, KL_TYPES)
    _choice(p, "algorithm.old_log_prob_source", alg.old_log_prob_source, OLD_LOG_PROB_SOURCES)
    _at_least(p, "algorithm.kl_loss_coef", alg.kl_loss_coef, 0.0)
    for key in ("clip_ratio_low", "clip_ratio_high"):
        value = alg[key]
        if not 0 < value < 1 and key == "clip_ratio_low":
            p.append(f"algorithm.{key}={value}: must be in (0, 1)")
        elif value <= 0:
            p.append(f"algorithm.{key}={value}: must be > 0")

    _choice(p, "learner.accelerator", lr.accelerator, ACCELERATORS)
    if lr.lr <= 0:
        p.append(f"learner.lr={lr.lr}: must be > 0")
    _at_least(p, "learner.ppo_epochs", lr.ppo_epochs, 1)
    if lr.ppo_epochs > 1 and alg.old_log_prob_source == "learner":
        p.append(
            f"learner.ppo_epochs={lr.ppo_epochs} with algorithm.old_log_prob_source=learner: "
            "after the first epoch "
            "the learner's log-probs are no longer the old policy's; set algorithm.old_log_prob_source=actor"
        )
    _at_least(p, "learner.length_bucket", lr.length_bucket, 1)
    seqs = r.batch_size * r.n
    mb = lr.micro_batch_size
    if mb < 1 or seqs % mb:
        p.append(
            f"learner.micro_batch_size={mb}: must divide the sequences per step "
            f"(rollout.batch_size * rollout.n = {seqs}); valid values: {_divisors(seqs)}"
        )
    for role in ("rollout", "actor_ref", "reward", "learner"):
        res = cfg[role].resources
        if res.cpus <= 0:
            p.append(f"{role}.resources.cpus={res.cpus}: must be > 0 (a Ray CPU reservation for the role)")
        _at_least(p, f"{role}.resources.threads", res.threads, 0)
    _at_least(p, "trainer.steps", cfg.trainer.steps, 1)
    _choice(p, "placement.strategy", cfg.placement.strategy, STRATEGIES)
    if cfg.placement.timeout_s <= 0:
        p.append(f"placement.timeout_s={cfg.placement.timeout_s}: must be > 0")
    return p
