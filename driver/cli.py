"""The driver's command line: arguments, which run to resume, a new run directory, ``--print-plan``."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from relay.checkpoint import resolve_resume
from relay.checkpoint.store import set_aside
from relay.config import ConfigError, LoadedConfig, RelayConfig, print_warnings
from relay.repo import DEFAULT_PRESET

RESUME_LATEST = "latest"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Relay: GRPO post-training on Ray")
    p.add_argument("--config", default=None, help="YAML preset (default: configs/default.yaml)")
    p.add_argument(
        "--resume",
        nargs="?",
        const=RESUME_LATEST,
        default=None,
        metavar="RUN_DIR|CHECKPOINT",
        help="continue a run from its newest checkpoint (or the given one); its config.yaml is the preset",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value (repeatable), e.g. --set rollout.n=8",
    )
    p.add_argument(
        "--deterministic",
        action="store_true",
        help="bitwise-repeatable run for a fixed trainer.seed (sets trainer.deterministic=true)",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="every library's output on the terminal (default: in outputs/<run>/logs/; RELAY_LOG_LEVEL=verbose too)",
    )
    p.add_argument("--print-config", action="store_true", help="print the merged config and exit")
    p.add_argument(
        "--explain",
        nargs="?",
        const="",
        default=None,
        metavar="KEY",
        help="every value and where it came from; with KEY (or a section, e.g. rollout.agent): its type, default, "
        "allowed values, meaning and value here (docs/configuration.md)",
    )
    p.add_argument(
        "--print-plan",
        action="store_true",
        help="print the placement plan for the running cluster (RAY_ADDRESS), a declared one "
        "(--set cluster.nodes=...), or this machine, and whether it fits; starts no roles",
    )
    args = p.parse_args(argv)
    if args.deterministic:
        args.overrides.append("trainer.deterministic=true")
    return args


def resume_target(args: argparse.Namespace) -> tuple[str, Path | None, Path | None]:
    """``(preset, checkpoint, run_dir)``: with ``--resume`` the run's own ``config.yaml`` is the preset
    (env and ``--set`` still apply on top, e.g. more steps); the paths are absolute."""
    if args.resume is None:
        return args.config or str(DEFAULT_PRESET), None, None
    if args.config is not None:
        raise ConfigError("--resume reads the run's own config.yaml; drop --config (use --set to change values)")
    target = Path(args.resume) if args.resume != RESUME_LATEST else None
    if target is None:
        name = _run_name_from_overrides(args.overrides)
        if name is None:
            raise ConfigError(
                "--resume without a path needs the run: pass --resume outputs/<run> or --set trainer.run_name=<run>"
            )
        target = Path(_output_dir_from_overrides(args.overrides)) / name
    # Absolute, as a new run's directory is: the learner opens the checkpoint in its own working directory, which
    # is not the driver's (and under `ray job submit` a relative path means the submit directory).
    from relay.run.job import resolve_output_dir

    run_dir, checkpoint, refused = resolve_resume(resolve_output_dir(target, os.environ, Path.cwd()))
    for path, reason in refused:
        print(f"checkpoint {path} refused: {reason}; set aside as {set_aside(path).name}", file=sys.stderr)
    if refused:
        print(f"resuming from {checkpoint}, the newest usable checkpoint", file=sys.stderr)
    return str(run_dir / "config.yaml"), checkpoint, run_dir


def _run_name_from_overrides(overrides: list[str]) -> str | None:
    for item in overrides:
        if item.startswith("trainer.run_name="):
            return item.split("=", 1)[1]
    return None


def _output_dir_from_overrides(overrides: list[str]) -> str:
    for item in overrides:
        if item.startswith("trainer.output_dir="):
            return item.split("=", 1)[1]
    return "outputs"


def new_run_dir(cfg: RelayConfig, preset_name: str) -> Path:
    """A new ``<output_dir>/<run_name>``, absolute (:func:`relay.run.job.resolve_output_dir`: under ``ray job
    submit`` a relative ``trainer.output_dir`` is resolved where the user submitted from, not in Ray's copy of the
    working dir): a chosen name that exists is refused, a generated one gets a suffix."""
    from relay.run import RunDirError, create_run_dir
    from relay.run.job import resolve_output_dir

    explicit = bool(cfg.trainer.run_name)
    name = cfg.trainer.run_name or f"{preset_name}-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    output_dir = resolve_output_dir(cfg.trainer.output_dir, os.environ, Path.cwd())  # absolute, also in a job
    try:
        return create_run_dir(output_dir, name, explicit)
    except RunDirError as exc:
        raise ConfigError(str(exc)) from None


def print_plan(loaded: LoadedConfig) -> int:
    """``--print-plan``: exit 0 when the plan fits the cluster, 2 when it does not."""
    from placement.cluster import declared_nodes, ray_init_address, ray_nodes, this_machine
    from placement.fit import print_plan as render

    cfg = loaded.cfg
    address = ray_init_address()
    if cfg.cluster.nodes is not None:
        nodes, source = declared_nodes(cfg.cluster), "declared by cluster.* (all resources free)"
    elif address != "local":
        import ray

        from placement.connect import RayConnectError, connect_ray

        try:
            connect_ray(address, cfg.trainer.ray_init_timeout_s, log_to_driver=False)
        except RayConnectError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        try:
            nodes, source = ray_nodes(), f"the running Ray cluster at {address}"
        finally:
            ray.shutdown()
    else:
        nodes, source = this_machine(), "this machine (a local Ray would be started here)"
    text, fits = render(cfg, nodes, source)
    print(text)
    print_warnings(loaded)
    return 0 if fits else 2
