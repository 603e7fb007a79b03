"""Relay driver: GRPO training as a relay of one DataProto between Ray actors.

    python trainer.py [--config configs/<preset>.yaml] [--set key=value ...] [--print-config]

With no Ray cluster it starts a local one; with ``RAY_ADDRESS`` set (or under
``ray job submit -- python trainer.py``) it joins that cluster.

One step: rollout -> (actor_ref log-probs || reward) -> GRPO advantage (here) -> learner update ->
weight sync to the rollout engine and the actor copy.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from driver import phases
from driver.cli import DEFAULT_PRESET, new_run_dir, parse_args, print_plan, resume_target
from driver.cli import REPO as REPO  # the repository root, re-exported for scripts and tests
from driver.dynamic_sampling import ExtraPrompts, MorePrompts, collect_filtered
from driver.phases import pop_metrics as pop_metrics  # re-exported for tests
from driver.reward_check import check_user_reward
from driver.run_record import emergency_checkpoint, record_start
from placement.plan import PlacementError, build_plan
from relay.checkpoint import CheckpointError
from relay.config import ConfigError, LoadedConfig, load_config, print_warnings, unsupported
from relay.data import DatasetError
from relay.data_proto import DataProto
from relay.grpo import get_advantage_estimator, group_rows, kl_penalized_scores
from relay.models.paths import ModelPathError, resolve_model_path, solver_model_path
from relay.scoring.user_function import RewardFunctionError
from relay.step_log import merge_rank_metrics, table_header, table_row

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


def advantage_phase(batch: DataProto, cfg: Any) -> tuple[DataProto, dict[str, float]]:
    """GRPO group-relative advantages on the driver (numpy; microseconds for a step's batch).

    With ``algorithm.use_kl_in_reward`` the scores first lose ``kl_coef`` x each response's summed
    KL to the reference (old-policy log-probs when the batch has them, else the rollout's).
    """
    alg = cfg.algorithm
    scores = batch.batch["scores"]
    metrics: dict[str, float] = {}
    if alg.use_kl_in_reward:
        policy = batch.batch.get("old_log_probs", batch.batch["rollout_log_probs"])
        scores, kl = kl_penalized_scores(
            scores, policy, batch.batch["ref_log_probs"], batch.batch["response_mask"], alg.kl_coef, alg.kl_loss_type
        )
        metrics["reward/kl_penalty_mean"] = float(alg.kl_coef * kl.mean())
        metrics["reward/penalized_mean"] = float(scores.mean())
    estimator = get_advantage_estimator(alg.adv_estimator)
    token_adv, seq_adv = estimator(
        scores, batch.non_tensor["uid"], batch.batch["response_mask"], norm_by_std=alg.norm_adv_by_std
    )
    out = batch.union(DataProto.from_dict(batch={"advantages": token_adv.astype(np.float32)}))
    return out, {
        **metrics,
        "advantage/abs_mean": float(np.abs(seq_adv).mean()),
        "advantage/zero_groups_frac": _zero_group_frac(batch),
    }


def _zero_group_frac(batch: DataProto) -> float:
    """Share of prompt groups whose samples all scored the same (they carry no gradient)."""
    scores = batch.batch["scores"]
    return float(np.mean([np.ptp(scores[rows]) == 0 for rows in group_rows(batch.non_tensor["uid"])]))


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
        batch, adv_metrics = advantage_phase(collect_filtered(roles, prompts, cfg, step, m, more_prompts), cfg)
        m.update(adv_metrics)
        m.update(overlap_metrics(m, m["timing/actor_ref_and_reward"], False))
        m["timing/advantage"] = time.perf_counter() - t2
        return batch
    t0 = time.perf_counter()
    gen = phases.rollout(roles, prompts, step, m)
    t1 = time.perf_counter()
    # Log-probs and grading both need only the rollout output: run them at the same time (unless
    # reward.overlap_with_actor_ref=false, which grades after the log-probs to measure the overlap).
    overlap = grades_beside_log_probs(cfg)
    lp_refs = phases.submit_log_probs(roles, gen)
    rw_ref = phases.submit_reward(roles, gen, cfg, step) if overlap else None
    lp = phases.gather_log_probs(roles, gen, lp_refs, m)
    if rw_ref is None:
        rw_ref = phases.submit_reward(roles, gen, cfg, step)
    rw = phases.gather_reward(rw_ref)
    t2 = time.perf_counter()
    m["actor_ref/ref_forward"] = 0.0  # the role reports 1.0 when it ran the reference forward
    for part in (gen, rw) if lp is None else (gen, lp, rw):
        m.update(pop_metrics(part))
    batch, adv_metrics = advantage_phase((gen if lp is None else gen.union(lp)).union(rw), cfg)
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
    from roles.launch import call
    from roles.recovery import with_recovery

    m: dict[str, float] = {"step": step}
    recovered: list[str] = []
    attempts = int(cfg.trainer.role_restarts)
    t0 = time.perf_counter()
    more = ExtraPrompts(more_prompts) if more_prompts is not None else None  # the same prompts on a retry
    batch = with_recovery(lambda: collect_phase(roles, prompts, cfg, step, m, more), roles, attempts, recovered.append)
    t3 = time.perf_counter()
    train_keys = [k for k in LEARNER_INPUTS if k in batch.batch]
    if cfg.rollout.sleep_during_update:
        fanout.each(roles.rollout, "rollout", "sleep", "rollout sleep")
    # The last synced weights are not needed from here on (a role restarted during the update gets this
    # step's weights in the sync below); dropping them now frees their object-store memory before the
    # learner puts the new weights, which then reuse those pages instead of touching fresh ones in every
    # process that writes or reads them (measured: +0.5 GiB RSS per step in the learner and the rollout).
    roles.weights_ref = None
    # Every learner host gets its share of the rows at once (the update is one JAX job across them).
    refs = fanout.submit_shares(roles.learners, "update", batch.select(train_keys, []))
    outs = call(fanout.names("learner", refs), refs, "update")
    weights_ref = outs[0][1]  # rank 0 publishes the weights
    m.update(merge_rank_metrics([metrics for metrics, _ in outs]))
    t4 = time.perf_counter()
    if cfg.rollout.sleep_during_update:
        fanout.each(roles.rollout, "rollout", "wake_up", "rollout wake-up")
    rollout_load, actor_load = with_recovery(
        lambda: fanout.load_weights(roles, weights_ref, step + 1), roles, attempts, recovered.append
    )
    t5 = time.perf_counter()
    m.update(batch_metrics(batch))
    if "filter/sampled_reward_mean" in m:  # dynamic sampling: the policy's reward is that of every sample drawn
        m["reward/trained_mean"], m["reward/mean"] = m["reward/mean"], m["filter/sampled_reward_mean"]
        m["reward/trained_accuracy"], m["reward/accuracy"] = m["reward/accuracy"], m["filter/sampled_accuracy"]
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
    m["memory/roles_peak_rss_gib"] = sum(
        v for k, v in m.items() if k.startswith("memory/") and k.endswith("_peak_rss_gib")
    )
    m["timing/driver_and_ray_overhead"] = max(0.0, m["timing/step"] - compute)
    return batch, m


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        preset, checkpoint, run_dir = resume_target(args)
        loaded = load_config(preset, args.overrides)
        if args.print_config or args.explain:
            print(loaded.explain() if args.explain else loaded.to_yaml(), end="")
            print_warnings(loaded)
            return 0
        if args.print_plan:
            return print_plan(loaded)
        problems = unsupported(loaded.cfg)
        if problems:
            raise ConfigError("not supported by this build yet:\n  " + "\n  ".join(problems))
        model_path = resolve_model_path(loaded.cfg.model.path)
        if loaded.cfg.reward.mode == "solver":
            solver_model_path(loaded.cfg, model_path)  # a missing solver checkpoint is a config error
        if loaded.cfg.reward.mode == "function":  # import it and score one example before Ray starts
            print(check_user_reward(loaded.cfg, model_path), file=sys.stderr)
        build_plan(loaded.cfg)  # impossible layouts are config errors, found before Ray starts
        if run_dir is None:
            run_dir = new_run_dir(loaded.cfg, Path(args.config or DEFAULT_PRESET).stem)
    except (ConfigError, ModelPathError, PlacementError, CheckpointError, RewardFunctionError) as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    except (DatasetError, FileNotFoundError) as exc:
        print(f"data error: {exc}", file=sys.stderr)
        return 2
    print_warnings(loaded)
    import ray

    from placement.cluster import ray_init_address

    ray.init(address=ray_init_address(), log_to_driver=True)
    try:
        return train(loaded, model_path, run_dir, checkpoint)
    finally:
        ray.shutdown()


def train(loaded: LoadedConfig, model_path: Path, run_dir: Path, checkpoint: Path | None = None) -> int:
    """Start the roles on the connected Ray, run the configured steps (from ``checkpoint`` when
    resuming), write metrics and checkpoints into ``run_dir``; returns the exit code."""
    cfg = loaded.cfg
    from omegaconf import OmegaConf
    from tqdm import tqdm
    from transformers import AutoTokenizer

    from placement.cluster import ray_nodes
    from placement.fit import plan_for
    from relay.data import DatasetError
    from relay.data.prompt_source import PromptSource, validation_prompts
    from relay.run import EventLog, build_sinks, close_sinks
    from roles.checkpoints import restore_checkpoint, save_checkpoint, truncate_metrics
    from roles.dashboard_metrics import StepGauges
    from roles.launch import RoleFailedError, start_roles, stop_roles
    from roles.validation import run_validation

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(model_path))
        prompts = PromptSource.from_config(cfg.data, tokenizer, loaded.derived.effective_global_prompts)
        val_prompts = None
        if cfg.trainer.test_freq > 0:
            val_prompts = validation_prompts(cfg.data, tokenizer, cfg.trainer.val_samples)
    except (DatasetError, FileNotFoundError) as exc:
        print(f"data error: {exc}", file=sys.stderr)
        return 2
    config_yaml = OmegaConf.to_yaml(cfg)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(config_yaml)
    run_name = run_dir.name
    events = EventLog(run_dir)
    roles, sinks = None, []
    step, data_state = 0, prompts.batcher.state_dict()
    try:
        nodes = ray_nodes()
        record_start(loaded, model_path, run_dir, nodes, checkpoint, events)
        events.write(
            "data",
            examples=len(prompts.examples),
            dropped_too_long=prompts.dropped_too_long,
            truncated=prompts.truncated,
            dropped_too_many_chars=prompts.dropped_too_many_chars,
            truncated_chars=prompts.truncated_chars,
        )
        roles = start_roles(loaded, plan_for(cfg, nodes), str(model_path), run_id=run_name)
        start_step = 0
        if checkpoint is not None:
            state = restore_checkpoint(roles, checkpoint)
            prompts.batcher.load_state_dict(state["data"])
            start_step = int(state["next_step"])
            dropped = truncate_metrics(run_dir / "metrics.jsonl", start_step)
            events.write("resume", checkpoint=checkpoint, step=start_step, dropped_metric_lines=dropped)
            tqdm.write(f"resumed from {checkpoint} at step {start_step} ({dropped} later metric lines dropped)")
        resume_step = start_step if checkpoint is not None else None
        sinks = build_sinks(run_dir, run_name, OmegaConf.to_container(cfg, resolve=True), resume_step=resume_step)
        gauges = StepGauges(run_name)
        tqdm.write(f"roles started in Ray namespace {roles.namespace}: {', '.join(roles.handles())}")
        tqdm.write(table_header())
        total, save_freq = cfg.trainer.total_training_steps, cfg.trainer.save_freq
        last_saved = start_step if checkpoint is not None else -1
        step = start_step
        for step in tqdm(range(start_step, total), desc="grpo steps", unit="step", file=sys.stderr):
            if cfg.trainer.total_epochs is not None and prompts.epochs_done >= cfg.trainer.total_epochs:
                tqdm.write(f"stopping: trainer.total_epochs={cfg.trainer.total_epochs} passes over the data done")
                break
            data_state = prompts.batcher.state_dict()  # the cursor before this step's prompts
            _, metrics = run_step(roles, prompts.next_batch(), cfg, step, more_prompts=prompts.next_batch)
            metrics["data/epochs_done"] = float(prompts.epochs_done)
            if val_prompts is not None and ((step + 1) % cfg.trainer.test_freq == 0 or step + 1 == total):
                metrics.update(run_validation(roles, val_prompts, cfg.trainer.val_k, step + 1, seed=cfg.trainer.seed))
                events.write("validation", step=step + 1, **{k: v for k, v in metrics.items() if k.startswith("val/")})
            for sink in sinks:
                sink.write(step, metrics)
            if metrics.get("learner/skipped_steps", 0) > 0:
                events.write(
                    "skipped_batch",
                    step=step,
                    optimizer_steps_skipped=metrics["learner/skipped_steps"],
                    consecutive=metrics.get("learner/consecutive_skips"),
                )
            gauges.publish(metrics)
            tqdm.write(table_row(metrics))
            if save_freq > 0 and (step + 1) % save_freq == 0:
                path = save_checkpoint(
                    roles, run_dir, step + 1, prompts.batcher.state_dict(), cfg, config_yaml, str(model_path)
                )
                last_saved = step + 1
                events.write("checkpoint", step=step + 1, path=path)
                tqdm.write(f"checkpoint: {path}")
        else:
            step = total
        if save_freq > 0 and last_saved != step:
            path = save_checkpoint(
                roles, run_dir, step, prompts.batcher.state_dict(), cfg, config_yaml, str(model_path)
            )
            events.write("checkpoint", step=step, path=path)
            tqdm.write(f"checkpoint: {path}")
        events.write("finish", steps_done=step)
    except PlacementError as exc:
        events.write("error", kind="placement", message=str(exc))
        print(f"placement error: {exc}", file=sys.stderr)
        return 2
    except RoleFailedError as exc:
        events.write("error", kind="role_failed", actor=exc.actor, step=step, message=str(exc))
        print(f"error: {exc}", file=sys.stderr)
        emergency_checkpoint(roles, exc, run_dir, step, data_state, cfg, config_yaml, model_path, events)
        return 1
    finally:
        close_sinks(sinks)
        stop_roles(roles)
    print(f"metrics: {run_dir / 'metrics.jsonl'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
