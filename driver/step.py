"""One GRPO step on the driver: the phases before the update (rollout, actor_ref || reward, advantage), the
update, the weight sync, and the step's metrics. ``trainer.py`` runs these in its loop; with
``trainer.max_staleness`` >= 1, ``driver/pipeline.py`` runs the same phases with the collect ahead.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from driver import phases, remax
from driver.dynamic_sampling import ExtraPrompts, MorePrompts, collect_filtered
from driver.phases import pop_metrics
from relay.data_proto import DataProto
from relay.grpo import get_advantage_estimator, kl_penalized_scores
from relay.grpo.group_filter import split_groups
from relay.grpo.kl_controller import KLController
from relay.run import timeline
from relay.step_log import merge_rank_metrics

LEARNER_INPUTS = (
    "input_ids",
    "attention_mask",
    "position_ids",
    "response_mask",
    "advantages",
    "ref_log_probs",
    "old_log_probs",
    "rollout_log_probs",
)


def advantage_phase(
    batch: DataProto, cfg: Any, kl_control: KLController | None = None
) -> tuple[DataProto, dict[str, float]]:
    """The advantages of ``algorithm.adv_estimator`` on the driver (numpy; microseconds for a step's batch).

    With ``algorithm.use_kl_in_reward`` the scores first lose ``kl_coef`` x each response's summed
    KL to the reference (old-policy log-probs when the batch has them, else the rollout's); ``kl_control`` (the
    run's :class:`relay.grpo.kl_controller.KLController`, default a fixed ``algorithm.kl_coef``) gives ``kl_coef``
    and, when adaptive, is updated with this batch's mean per-token KL.
    """
    alg = cfg.algorithm
    scores = batch.batch["scores"]
    metrics: dict[str, float] = {}
    if alg.use_kl_in_reward:
        control = kl_control or KLController(float(alg.kl_coef))
        coef, mask = control.value, batch.batch["response_mask"]
        policy = batch.batch.get("old_log_probs", batch.batch["rollout_log_probs"])
        scores, kl = kl_penalized_scores(scores, policy, batch.batch["ref_log_probs"], mask, coef, alg.kl_loss_type)
        metrics["reward/kl_penalty_mean"] = float(coef * kl.mean())
        metrics["reward/penalized_mean"] = float(scores.mean())
        metrics["reward/kl_coef"] = coef  # the coefficient this batch was penalised with
        metrics["reward/kl_per_token"] = float(kl.sum() / max(float(np.sum(mask)), 1.0))
        control.update(metrics["reward/kl_per_token"], len(scores))
    estimator = get_advantage_estimator(alg.adv_estimator)
    options: dict[str, Any] = {"norm_by_std": alg.norm_adv_by_std, "gamma": alg.gamma}
    if alg.adv_estimator == "remax":  # the greedy responses' rewards (driver.remax), not KL-penalised
        options["baselines"] = batch.batch["remax_baselines"]
    token_adv, seq_adv = estimator(scores, batch.non_tensor["uid"], batch.batch["response_mask"], **options)
    out = batch.union(DataProto.from_dict(batch={"advantages": token_adv.astype(np.float32)}))
    return out, {
        **metrics,
        "advantage/abs_mean": float(np.abs(seq_adv).mean()),
        "advantage/zero_groups_frac": _zero_group_frac(batch),
    }


def _zero_group_frac(batch: DataProto) -> float:
    """Share of prompt groups whose samples all scored the same (they carry no gradient)."""
    split = split_groups(batch.batch["scores"], batch.non_tensor["uid"])
    return len(split.constant) / (len(split.constant) + len(split.signal))


def batch_metrics(batch: DataProto) -> dict[str, float]:
    lengths = batch.batch["response_length"]
    return {
        "reward/mean": float(batch.batch["scores"].mean()),
        "reward/std": float(batch.batch["scores"].std()),
        "reward/accuracy": float(batch.batch["acc"].mean()),
        "response/length_mean": float(lengths.mean()),
        "response/length_max": float(lengths.max()),
        "batch/sequences": float(len(batch)),
        "batch/prompt_width": float(batch.batch["prompts"].shape[1]),
        "batch/response_width": float(batch.batch["responses"].shape[1]),
    }


def grades_beside_log_probs(cfg: Any) -> bool:
    """Whether a step grades at the same time as the actor_ref forward (not with dynamic sampling, which
    grades first and runs the forward on the kept groups only)."""
    return bool(cfg.reward.overlap_with_actor_ref) and not cfg.algorithm.filter_groups.enable


def collect_phase(
    roles: Any, prompts: DataProto, cfg: Any, step: int, m: dict, more_prompts: MorePrompts | None = None
) -> DataProto:
    """rollout -> (actor_ref log-probs || reward) -> advantage; fills the phases' metrics into ``m``.

    A rollout sampled with weights older than the last sync (its actor was restarted by Ray in
    between) is thrown away: the replicas get the current weights and sample again. Without actor_ref
    actors (nothing reads reference or actor-copy log-probs: ``placement.plan.actor_ref_needed``) the
    reward phase runs alone and ``actor_ref/ref_forward`` is 0. With ``algorithm.filter_groups.enable``
    the rows come from :func:`driver.dynamic_sampling.collect_filtered` (``more_prompts`` draws the extra
    passes' prompts).
    """
    if cfg.algorithm.filter_groups.enable:
        if more_prompts is None:
            raise ValueError("algorithm.filter_groups.enable needs more_prompts to draw its extra rollout passes")
        t2 = time.perf_counter()
        collected = collect_filtered(roles, prompts, cfg, step, m, more_prompts)
        batch, adv_metrics = advantage_phase(collected, cfg, roles.kl_control)
        m.update(adv_metrics)
        m.update(overlap_metrics(m, m["timing/actor_ref_and_reward"], False))
        m["timing/advantage"] = time.perf_counter() - t2
        return batch
    t0 = time.perf_counter()
    gen = phases.rollout(roles, prompts, step, m)
    greedy_refs = remax.submit_greedy(roles, prompts, step) if cfg.algorithm.adv_estimator == "remax" else None
    t1 = time.perf_counter()
    # Log-probs and grading both need only the rollout output: run them at the same time (unless
    # reward.overlap_with_actor_ref=false, which grades after the log-probs to measure the overlap).
    overlap = grades_beside_log_probs(cfg)
    lp_refs = phases.submit_log_probs(roles, gen, step)
    rw_ref = phases.submit_reward(roles, gen, cfg, step) if overlap else None
    lp = phases.gather_log_probs(roles, gen, lp_refs, m)
    if rw_ref is None:
        rw_ref = phases.submit_reward(roles, gen, cfg, step)
    rw = phases.gather_reward(rw_ref)
    if greedy_refs is not None:
        baselines = remax.baseline_scores(roles, greedy_refs, gen, cfg, step, m)
        rw = rw.union(DataProto.from_dict(batch={"remax_baselines": baselines}))
    t2 = time.perf_counter()
    m["actor_ref/ref_forward"] = 0.0  # the role reports 1.0 when it ran the reference forward
    for part in (gen, rw) if lp is None else (gen, lp, rw):
        m.update(pop_metrics(part))
    batch, adv_metrics = advantage_phase((gen if lp is None else gen.union(lp)).union(rw), cfg, roles.kl_control)
    m.update(adv_metrics)
    m.update({"timing/rollout": t1 - t0, "timing/actor_ref_and_reward": t2 - t1})
    m.update(overlap_metrics(m, t2 - t1, overlap))
    m["timing/advantage"] = time.perf_counter() - t2
    return batch


def overlap_metrics(m: dict[str, float], phase_seconds: float, overlapped: bool) -> dict[str, float]:
    """What running reward beside the actor_ref log-probs saved: the two roles' own compute times summed
    (the phase's length had they run back to back at those speeds) minus the phase's wall time.

    Worked example: log-probs 8 s and grading 5 s inside their roles, phase wall time 9 s -> saving 4 s,
    ``timing/reward_overlap_saving_frac`` 4 / 13 = 0.31. Run back to back (``overlapped`` False) the saving
    is reported as 0. On a machine whose cores both roles need, each role's compute time grows when they
    overlap, so this is the saving at the overlapped speeds; ``reward.overlap_with_actor_ref=false`` measures
    the sequential phase directly."""
    back_to_back = m.get("timing/actor_ref_compute", 0.0) + m.get("timing/reward_compute", 0.0)
    saving = max(0.0, back_to_back - phase_seconds) if overlapped else 0.0
    return {
        "timing/reward_overlap_saving": saving,
        "timing/reward_overlap_saving_frac": saving / back_to_back if back_to_back > 0 else 0.0,
    }


def update_phase(roles: Any, batch: DataProto, cfg: Any, m: dict[str, float], free_synced: bool = True) -> Any:
    """The learner update of ``batch`` on every learner host; returns the object-store ref of the new weights
    (rank 0 publishes them) and puts the learner's metrics into ``m``.

    ``free_synced`` drops the driver's ref to the last synced weights first: nothing needs them from here on
    in the on-policy loop (a role restarted during the update gets this step's weights in the sync), and the
    learner's put then reuses their object-store pages instead of touching fresh ones in every process that
    writes or reads them (measured: +0.5 GiB RSS per step in the learner and the rollout). The pipeline
    keeps them: its collect thread may still resync a restarted rollout with them.
    """
    from roles import fanout
    from roles.launch import call

    train_keys = [k for k in LEARNER_INPUTS if k in batch.batch]
    if cfg.rollout.sleep_during_update:
        fanout.each(roles.rollout, "rollout", "sleep", "rollout sleep")
    if free_synced:
        fanout.release_weights(roles, roles.weights_ref)
        roles.weights_ref = None
    # Every learner host gets its share of the rows at once (the update is one JAX job across them).
    start = time.time()
    refs = fanout.submit_shares(roles.learners, "update", batch.select(train_keys, []))
    outs = call(fanout.names("learner", refs), refs, "update")
    timeline.record("learner", "update", start, time.time(), int(m.get("step", -1)))
    m.update(merge_rank_metrics([metrics for metrics, _ in outs]))
    if cfg.rollout.sleep_during_update:
        fanout.each(roles.rollout, "rollout", "wake_up", "rollout wake-up")
    return outs[0][1]


def reward_and_memory_metrics(m: dict[str, float], batch: DataProto) -> None:
    """The trained batch's reward/length metrics, and the roles' peak memory summed, into ``m``."""
    m.update(batch_metrics(batch))
    if "filter/sampled_reward_mean" in m:  # dynamic sampling: the policy's reward is that of every sample drawn
        m["reward/trained_mean"], m["reward/mean"] = m["reward/mean"], m["filter/sampled_reward_mean"]
        m["reward/trained_accuracy"], m["reward/accuracy"] = m["reward/accuracy"], m["filter/sampled_accuracy"]
    m["memory/roles_peak_rss_gib"] = sum(
        v for k, v in m.items() if k.startswith("memory/") and k.endswith("_peak_rss_gib")
    )


def run_step(
    roles: Any, prompts: DataProto, cfg: Any, step: int, more_prompts: MorePrompts | None = None
) -> tuple[DataProto, dict[str, float]]:
    """One GRPO step across the roles; returns the final batch and the step's metrics. ``more_prompts(size,
    sample_pass)`` draws the prompts of dynamic sampling's extra passes (``algorithm.filter_groups``).

    A rollout/actor_ref/reward actor that dies during the step is restarted by Ray, given the current
    weights, and the phases before the update are run again from the driver's copy of the prompts
    (``recovery/restarts``); a death during the sync is healed the same way. The update itself is
    never repeated.
    """
    from roles import fanout
    from roles.recovery import with_recovery

    m: dict[str, float] = {"step": step}
    recovered: list[str] = []
    attempts = int(cfg.trainer.role_restarts)
    t0 = time.perf_counter()
    more = ExtraPrompts(more_prompts) if more_prompts is not None else None  # the same prompts on a retry
    batch = with_recovery(lambda: collect_phase(roles, prompts, cfg, step, m, more), roles, attempts, recovered.append)
    t3 = time.perf_counter()
    weights_ref = update_phase(roles, batch, cfg, m)
    t4 = time.perf_counter()
    rollout_load, actor_load = with_recovery(
        lambda: fanout.load_weights(roles, weights_ref, step + 1), roles, attempts, recovered.append
    )
    t5 = time.perf_counter()
    reward_and_memory_metrics(m, batch)
    m["recovery/restarts"] = float(len(recovered))
    m["sync/seconds"] = m["sync/export_seconds"] + (t5 - t4)  # learner export + put, then engines' loads
    m["sync/rollout_load_seconds"] = rollout_load
    m["sync/actor_load_seconds"] = actor_load
    m.update({"timing/update": t4 - t3, "timing/sync": t5 - t4, "timing/step": t5 - t0})
    m["timing/reward_share_of_step"] = m.get("timing/reward_compute", 0.0) / m["timing/step"]
    compute = sum(m.get(k, 0.0) for k in ("timing/rollout_compute", "timing/update_compute"))
    side_by_side = (m.get("timing/actor_ref_compute", 0.0), m.get("timing/reward_compute", 0.0))
    compute += max(side_by_side) if grades_beside_log_probs(cfg) else sum(side_by_side)
    compute += m["sync/export_seconds"] + max(rollout_load, actor_load)
    m["timing/driver_and_ray_overhead"] = max(0.0, m["timing/step"] - compute)
    return batch, m
