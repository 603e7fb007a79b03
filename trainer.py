"""Relay driver: GRPO training as a relay of one DataProto between Ray actors.

    python trainer.py [--config configs/<preset>.yaml] [--set key=value ...] [--print-config]

With no Ray cluster it starts a local one; with ``RAY_ADDRESS`` set (or under
``ray job submit -- python trainer.py``) it joins that cluster.

One step: rollout -> (actor_ref log-probs || reward) -> GRPO advantage (on the driver, ``driver/collect.py``) ->
learner update -> weight sync to the rollout engine and the actor copy (``driver/step.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from driver.checkpoints import CheckpointWriteError
from driver.cli import new_run_dir, parse_args, print_plan, resume_target
from driver.head_watch import HeadWatch
from driver.reward_check import check_user_reward
from driver.run_record import print_resume_hint
from driver.stop_signal import EXIT_STOPPED
from driver.training_run import TrainingRun
from placement.plan import PlacementError, build_plan
from relay.checkpoint import CheckpointError
from relay.checkpoint.store import INFLIGHT_DIR
from relay.config import ConfigError, LoadedConfig, load_config, print_warnings, unsupported
from relay.data import DatasetError
from relay.engines.vllm_cpu_support import vllm_cpu_problems
from relay.models.paths import (
    ModelPathError,
    check_model_family,
    check_model_files,
    resolve_model_path,
    solver_model_path,
)
from relay.repo import DEFAULT_PRESET
from relay.run.logs import quiet_requested
from relay.scoring.user_function import RewardFunctionError
from relay.tasks.run_tasks import check_datasets
from roles.role_call import RoleFailedError


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        preset, checkpoint, run_dir = resume_target(args)
        loaded = load_config(preset, args.overrides)
        if args.explain:
            print(loaded.explain_key(args.explain), end="")
            return 0
        if args.print_config or args.explain is not None:
            print(loaded.explain() if args.explain is not None else loaded.to_yaml(), end="")
            print_warnings(loaded)
            return 0
        if args.print_plan:
            return print_plan(loaded)
        model_path = check_before_ray(loaded, checkpoint)
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
    from placement.connect import RayConnectError, connect_ray

    quiet = quiet_requested(args.verbose)
    try:
        context = connect_ray(
            ray_init_address(),
            loaded.cfg.trainer.ray_init_timeout_s,
            log_to_driver=not quiet,  # quiet: each role writes outputs/<run>/logs/<actor>.log instead
            logging_level=logging.WARNING if quiet else logging.INFO,
        )
    except RayConnectError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        return train(loaded, model_path, run_dir, checkpoint, quiet=quiet, dashboard_url=context.dashboard_url)
    finally:
        ray.shutdown()


def check_before_ray(loaded: LoadedConfig, checkpoint: Path | None) -> Path:
    """What can be checked before Ray starts, each problem a config (or data) error: settings this build cannot run,
    the model checkpoint (its weight files all there and matching its config.json) and the solver's, the datasets
    (every row of both splits), a user reward function (scored on one example), the placement plan's shape, and a
    pipelined run's checkpoint resumed without its pipeline. Returns the model's directory."""
    cfg = loaded.cfg
    problems = unsupported(cfg)
    if problems:
        raise ConfigError("not supported by this build yet:\n  " + "\n  ".join(problems))
    model_path = resolve_model_path(cfg.model.path)
    check_model_files(model_path)  # the policy's shards all there, their shapes the config's
    check_model_family(model_path)  # a family and options the learner implements
    solver_dir = solver_model_path(cfg, model_path) if cfg.reward.mode == "solver" else None  # missing: an error
    engine_problems = vllm_cpu_problems(cfg, model_path, solver_dir)  # a head size vLLM-CPU has no kernel for
    if engine_problems:
        raise ConfigError("\n".join(engine_problems))
    check_datasets(cfg.data)  # every row of both splits read through its task: a bad row names its file, row and field
    if cfg.reward.mode == "function":  # import it and score one example before Ray starts
        print(check_user_reward(cfg, model_path), file=sys.stderr)
    build_plan(cfg)  # impossible layouts are config errors, found before Ray starts
    if checkpoint is not None and cfg.trainer.max_staleness == 0 and (checkpoint / INFLIGHT_DIR).exists():
        raise CheckpointError(
            f"{checkpoint} was saved by a run with trainer.max_staleness >= 1 (it holds the collected batches "
            "of the steps ahead); resume it with that trainer.max_staleness"
        )
    return model_path


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
    run = TrainingRun(loaded, model_path, run_dir, checkpoint, quiet)
    try:
        run.load_data()
    except (DatasetError, FileNotFoundError) as exc:
        print(f"data error: {exc}", file=sys.stderr)
        return 2
    run.open(dashboard_url)
    # a lost GCS: a bounded, explained end (driver/head_watch.py), also while a failure is reported (which asks Ray)
    with HeadWatch(run_dir, run.events):
        try:
            run.start()
            with run.stop:  # SIGTERM: the step in flight ends, a checkpoint is written (driver/stop_signal.py)
                run.loop()
        except PlacementError as exc:
            return run.placement_failed(exc)
        except RoleFailedError as exc:
            return run.role_failed(exc)
        except CheckpointWriteError as exc:
            return run.checkpoint_failed(exc)
        finally:
            run.close()
    print(f"metrics: {run_dir / 'metrics.jsonl'}", file=sys.stderr)
    if run.stop.requested and run.step < loaded.cfg.trainer.total_training_steps:
        print_resume_hint(run_dir)
        return EXIT_STOPPED
    return 0


if __name__ == "__main__":
    sys.exit(main())
