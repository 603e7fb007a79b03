"""Relay driver: GRPO training as a relay of one DataProto between Ray actors.

    python trainer.py [--config configs/<preset>.yaml] [--set key=value ...] [--print-config]

With no Ray cluster it starts a local one; with ``RAY_ADDRESS`` set (or under
``ray job submit -- python trainer.py``) it joins that cluster.

One step: rollout -> (actor_ref log-probs || reward) -> GRPO advantage (here) -> learner update ->
weight sync to the rollout engine and the actor copy.
"""

from __future__ import annotations

import sys
from pathlib import Path

from driver.cli import DEFAULT_PRESET, new_run_dir, parse_args, print_plan, resume_target
from driver.cli import REPO as REPO  # the repository root, re-exported for scripts and tests
from driver.console import header_lines, memory_lines, print_role_log_tail
from driver.phases import pop_metrics as pop_metrics  # re-exported for tests and scripts
from driver.pipeline import INFLIGHT_FILE, RolloutPipeline, run_pipelined_step
from driver.reward_check import check_user_reward
from driver.run_record import emergency_checkpoint, record_start
from driver.step import LEARNER_INPUTS as LEARNER_INPUTS
from driver.step import advantage_phase as advantage_phase
from driver.step import run_step
from placement.plan import PlacementError, build_plan
from relay.checkpoint import CheckpointError
from relay.config import ConfigError, LoadedConfig, load_config, print_warnings, unsupported
from relay.data import DatasetError
from relay.models.paths import ModelPathError, resolve_model_path, solver_model_path
from relay.run.budget import WallClockBudget
from relay.run.logs import (
    DRIVER_LOG,
    LOGS_DIR,
    progress_bar_wanted,
    quiet_requested,
    route_library_logs,
    unroute_library_logs,
)
from relay.scoring.user_function import RewardFunctionError
from relay.step_log import table_header, table_row


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
        if checkpoint is not None and loaded.cfg.trainer.max_staleness == 0 and (checkpoint / INFLIGHT_FILE).exists():
            raise CheckpointError(
                f"{checkpoint} was saved by a run with trainer.max_staleness >= 1 (it holds the collected batches "
                "of the steps ahead); resume it with that trainer.max_staleness"
            )
        if run_dir is None:
            run_dir = new_run_dir(loaded.cfg, Path(args.config or DEFAULT_PRESET).stem)
    except (ConfigError, ModelPathError, PlacementError, CheckpointError, RewardFunctionError) as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    except (DatasetError, FileNotFoundError) as exc:
        print(f"data error: {exc}", file=sys.stderr)
        return 2
    print_warnings(loaded)
    import logging

    import ray

    from placement.cluster import ray_init_address

    quiet = quiet_requested(args.verbose)
    context = ray.init(
        address=ray_init_address(),
        log_to_driver=not quiet,  # quiet: each role writes outputs/<run>/logs/<actor>.log instead
        logging_level=logging.WARNING if quiet else logging.INFO,
    )
    try:
        return train(loaded, model_path, run_dir, checkpoint, quiet=quiet, dashboard_url=context.dashboard_url)
    finally:
        ray.shutdown()


def train(
    loaded: LoadedConfig,
    model_path: Path,
    run_dir: Path,
    checkpoint: Path | None = None,
    quiet: bool = False,
    dashboard_url: str | None = None,
) -> int:
    """Start the roles on the connected Ray, run the configured steps (from ``checkpoint`` when
    resuming), write metrics and checkpoints into ``run_dir``; returns the exit code. ``quiet``: the roles'
    and the driver's library output goes to ``run_dir/logs/`` (:mod:`relay.run.logs`), not the terminal."""
    cfg = loaded.cfg
    from omegaconf import OmegaConf
    from tqdm import tqdm
    from transformers import AutoTokenizer

    from placement.cluster import ray_nodes
    from placement.fit import plan_for
    from relay.data import DatasetError
    from relay.data.prompt_source import PromptSource, validation_prompts
    from relay.run import EventLog, build_sinks, close_sinks, timeline
    from relay.run.timeline import Timeline
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
    log_dir = run_dir / LOGS_DIR if quiet else None
    library_logs = route_library_logs(run_dir / LOGS_DIR / DRIVER_LOG) if quiet else None
    for line in header_lines(run_dir, model_path, dashboard_url, quiet):
        tqdm.write(line)
    run_name = run_dir.name
    events = EventLog(run_dir)
    spans = Timeline()
    timeline.use(spans)
    roles, sinks, pipe, gauges = None, [], None, None
    last_metrics: dict[str, float] = {}  # the newest step's, for the memory figures of a role that dies
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
        roles = start_roles(loaded, plan_for(cfg, nodes), str(model_path), run_id=run_name, log_dir=log_dir)
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
        total, save_freq = cfg.trainer.total_training_steps, cfg.trainer.save_freq
        bar = progress_bar_wanted()
        if not bar:
            minutes = cfg.trainer.time_budget_minutes
            budget_note = f" or {minutes} minutes" if minutes else ""
            tqdm.write(
                f"progress: steps {start_step}-{total - 1}{budget_note}, one row each (no progress bar: not a terminal)"
            )
        tqdm.write(table_header())
        last_saved = start_step if checkpoint is not None else -1
        step = start_step
        if cfg.trainer.max_staleness > 0:
            pipe = RolloutPipeline(roles, cfg, prompts, cfg.trainer.max_staleness, start_step)
            if checkpoint is not None and (Path(checkpoint) / INFLIGHT_FILE).exists():
                pipe.restore(Path(checkpoint) / INFLIGHT_FILE)
            data_state = None  # the cursor runs ahead of the step: no emergency checkpoint of "before the step"
        budget = WallClockBudget(cfg.trainer.time_budget_minutes)
        for step in tqdm(range(start_step, total), desc="grpo steps", unit="step", file=sys.stderr, disable=not bar):
            if cfg.trainer.total_epochs is not None and prompts.epochs_done >= cfg.trainer.total_epochs:
                tqdm.write(f"stopping: trainer.total_epochs={cfg.trainer.total_epochs} passes over the data done")
                break
            if not budget.next_step_fits():
                tqdm.write(
                    f"stopping: trainer.time_budget_minutes={cfg.trainer.time_budget_minutes} would be overrun by "
                    f"another step ({budget.elapsed_s() / 60:.1f} min so far, the last step took "
                    f"{budget.last_step_s / 60:.1f} min)"
                )
                events.write("time_budget", step=step, elapsed_s=budget.elapsed_s())
                break
            budget.step_started()
            if pipe is None:
                data_state = prompts.batcher.state_dict()  # the cursor before this step's prompts
                _, metrics = run_step(roles, prompts.next_batch(), cfg, step, more_prompts=prompts.next_batch)
            else:
                _, metrics = run_pipelined_step(roles, pipe, cfg, step)
            metrics["data/epochs_done"] = float(prompts.epochs_done)  # in a pipeline: the cursor k steps ahead
            budget.step_ended()
            last = step + 1 == total or not budget.next_step_fits()
            if val_prompts is not None and ((step + 1) % cfg.trainer.test_freq == 0 or last):
                if pipe is not None:
                    pipe.drain()  # validate the weights of this update, like the on-policy loop
                metrics.update(run_validation(roles, val_prompts, cfg.trainer.val_k, step + 1, seed=cfg.trainer.seed))
                events.write("validation", step=step + 1, **{k: v for k, v in metrics.items() if k.startswith("val/")})
            metrics["time/elapsed_s"] = budget.elapsed_s()  # since the first step started: the x of wall-clock plots
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
            last_metrics = metrics
            spans.write(run_dir)
            tqdm.write(table_row(metrics))
            if save_freq > 0 and (step + 1) % save_freq == 0:
                inflight = pipe.inflight_files() if pipe is not None else None  # drains: the cursor is final
                path = save_checkpoint(
                    roles, run_dir, step + 1, prompts.batcher.state_dict(), cfg, config_yaml, str(model_path), inflight
                )
                last_saved = step + 1
                events.write("checkpoint", step=step + 1, path=path)
                tqdm.write(f"checkpoint: {path}")
        else:
            step = total
        if save_freq > 0 and last_saved != step:
            inflight = pipe.inflight_files() if pipe is not None else None
            path = save_checkpoint(
                roles, run_dir, step, prompts.batcher.state_dict(), cfg, config_yaml, str(model_path), inflight
            )
            events.write("checkpoint", step=step, path=path)
            tqdm.write(f"checkpoint: {path}")
        events.write("finish", steps_done=step)
    except PlacementError as exc:
        events.write("error", kind="placement", message=str(exc))
        print(f"placement error: {exc}", file=sys.stderr)
        return 2
    except RoleFailedError as exc:
        import psutil

        node_gib = psutil.virtual_memory().total / 2**30
        peak = last_metrics.get(f"memory/{exc.role}_peak_rss_gib")
        kind = "out_of_memory" if exc.oom else "role_failed"
        events.write(
            "error",
            kind=kind,
            actor=exc.actor,
            step=step,
            message=str(exc),
            peak_rss_gib=peak,
            node_memory_gib=node_gib,
        )
        print(f"error: {exc}", file=sys.stderr)
        for line in memory_lines(exc.role, exc.oom, last_metrics, node_gib):
            print(f"  {line}", file=sys.stderr)
        if quiet:
            print_role_log_tail(run_dir, exc.actor)
        emergency_checkpoint(roles, exc, run_dir, step, data_state, cfg, config_yaml, model_path, events)
        return 1
    finally:
        timeline.use(None)
        if pipe is not None:
            pipe.close()
        if gauges is not None:
            gauges.close()
        close_sinks(sinks)
        stop_roles(roles)
        if library_logs is not None:
            unroute_library_logs(library_logs)
    print(f"metrics: {run_dir / 'metrics.jsonl'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
