"""What the driver records about a run besides metrics: the manifest and start event, and when a role fails for
good, the error (event and terminal) and the emergency checkpoint."""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from pathlib import Path

from driver.checkpoints import save_checkpoint
from driver.console import memory_lines, print_role_log_tail
from driver.launch import lost_node
from driver.role_group import Roles
from relay.checkpoint import latest_checkpoint
from relay.config import LoadedConfig, RelayConfig
from relay.faults import armed
from relay.metrics import system as sm
from relay.repo import REPO_ROOT
from relay.run import EventLog
from roles.role_call import RoleFailedError


def emergency_point(
    step: int, cursor_before: dict | None, last_updated_step: int | None, cursor_now: dict
) -> tuple[int, dict | None]:
    """Which state an emergency checkpoint after a failure in step ``step`` holds, as (next step, data cursor): the
    state before the step (``cursor_before``), unless the learner had already applied the step's update (the failure
    came in the sync after it), when it is the state after the step (``cursor_now``, past the step's prompts): the
    learner cannot take its update back, and a resume must not apply it twice.

    >>> emergency_point(4, {"pos": 16}, 3, {"pos": 20})  # failed before step 4's update
    (4, {'pos': 16})
    >>> emergency_point(4, {"pos": 16}, 4, {"pos": 20})  # failed in step 4's sync
    (5, {'pos': 20})
    """
    if last_updated_step == step:
        return step + 1, cursor_now
    return step, cursor_before


def report_role_failure(
    exc: RoleFailedError,
    events: EventLog,
    run_dir: Path,
    step: int,
    quiet: bool,
    last_metrics: dict[str, float],
    actor_nodes: dict[str, str],
) -> None:
    """A role failed for good in ``step``: an ``error`` event (``out_of_memory``, ``node_lost`` naming the node and
    what it held, or ``role_failed``), then on the terminal the role's log tail (quiet mode), the error and its
    memory figures (``last_metrics``: the newest step's) against the node's."""
    import psutil

    node_gib = psutil.virtual_memory().total / 2**30
    peak = last_metrics.get(sm.MEMORY_PEAK_RSS.format(role=exc.role))
    lost = lost_node(exc.actor, actor_nodes) if exc.died and not exc.oom else None
    kind = "out_of_memory" if exc.oom else "node_lost" if lost else "role_failed"
    message = str(exc) if lost is None else f"node {lost[0]} was lost; it held {', '.join(lost[1])}: {exc}"
    node_fields = {"node": lost[0], "roles": lost[1]} if lost else {}
    events.write(
        "error",
        kind=kind,
        actor=exc.actor,
        step=step,
        message=message,
        peak_rss_gib=peak,
        node_memory_gib=node_gib,
        **node_fields,
    )
    if quiet:  # first: the error and what to do are the last lines on the terminal, not above the log
        print_role_log_tail(run_dir, exc.actor)
    print(f"error: {message}", file=sys.stderr)
    for line in memory_lines(exc.role, exc.oom, last_metrics, node_gib):
        print(f"  {line}", file=sys.stderr)


def emergency_checkpoint(
    roles: Roles | None,
    exc: RoleFailedError,
    run_dir: Path,
    step: int,
    data_state: dict | None,
    cfg: RelayConfig,
    config_yaml: str,
    model_path: Path,
    events: EventLog,
    kl_coef: float | None = None,
    unrecorded: dict | None = None,
) -> None:
    """After a role failed for good: save the state before the failed step when the learner is alive (after it when
    its update was applied: ``step`` is then the next one, and ``unrecorded`` the step's row the run could not
    record), so ``--resume`` loses nothing; otherwise (or with no ``data_state``: a pipelined run, whose data cursor is
    ahead of the failed step) point at the newest checkpoint."""

    if roles is not None and exc.role != "learner" and data_state is not None:
        try:
            path = save_checkpoint(
                roles,
                run_dir,
                step,
                data_state,
                cfg,
                config_yaml,
                str(model_path),
                kl_coef=kl_coef,
                unrecorded=unrecorded,
            )
        except RoleFailedError as again:
            print(f"the emergency checkpoint failed too: {again}", file=sys.stderr)
        else:
            events.write("checkpoint", step=step, path=path, reason="emergency")
            print(f"saved {path}; continue with: python trainer.py --resume {run_dir}", file=sys.stderr)
            return
    print_resume_hint(run_dir)


def print_resume_hint(run_dir: Path) -> None:
    """How to go on: ``--resume`` on the run directory (its newest checkpoint that passes the integrity check), or
    that there is no checkpoint yet."""
    latest = latest_checkpoint(run_dir)
    if latest is not None:
        print(
            f"continue from the newest checkpoint ({latest.name}): python trainer.py --resume {run_dir}",
            file=sys.stderr,
        )
    else:
        print(
            "no checkpoint to resume from (the run ended before its first; trainer.save_freq: N saves every N steps)",
            file=sys.stderr,
        )


def record_start(
    loaded: LoadedConfig, model_path: Path, run_dir: Path, nodes: list, checkpoint: Path | None, events: EventLog
) -> None:
    """``manifest.json`` for a new run; a resumed run keeps its own, and its ``start`` event records the
    code (git) and cluster it resumed on. A ``start`` event either way."""
    from omegaconf import OmegaConf

    from placement.fit import memory_estimate
    from relay.run import build_manifest, write_manifest
    from relay.run.job import submitted_git
    from relay.run.manifest import git_info, split_fingerprints

    cfg = loaded.cfg
    for fault in armed():  # a fault-injection run: each fault and its campaign, so a failure replays
        events.write("fault_armed", **asdict(fault))
    cluster = {"nodes": [{"name": n.name, "total": n.total} for n in nodes]}
    git = submitted_git(os.environ)  # under `python submit.py`: the checkout as it was before the upload
    if checkpoint is not None:  # no manifest: hashing the model and data again would be wasted work
        events.write("start", resumed_from=checkpoint, git=git or git_info(REPO_ROOT), cluster=cluster, pid=os.getpid())
        return
    manifest = build_manifest(
        config=OmegaConf.to_container(cfg, resolve=True),
        derived=loaded.derived.as_dict(),
        seed=int(cfg.trainer.seed),
        data=split_fingerprints(OmegaConf.to_container(cfg.data, resolve=True)),
        model_dir=model_path,
        repo_dir=REPO_ROOT,
        cluster=cluster,
    )
    # What placement/memory.py expected each actor to hold, beside the per-step memory/* metrics it is
    # checked against (None when it cannot be made, e.g. no config.json).
    manifest["memory_estimate"] = memory_estimate(cfg, nodes)
    # The environment variables that set config values (the config above already holds their values).
    manifest["env_overrides"] = [asdict(override) for override in loaded.env_overrides]
    if git is not None:
        manifest["git"] = git
    write_manifest(run_dir, manifest)
    events.write("start", resumed_from=None, git=manifest.get("git"), cluster=cluster, pid=os.getpid())
