"""Start every role's actor in its placement-group bundle, and call them with errors that name the role."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import ray
from omegaconf import OmegaConf

from placement.group import create_placement_group, role_strategy
from placement.plan import PlacementPlan
from relay.config import LoadedConfig
from roles.actor_ref import ActorRefWorker
from roles.env import runtime_env
from roles.learner import LearnerWorker
from roles.reward import RewardWorker
from roles.rollout import RolloutWorker


class RoleFailedError(RuntimeError):
    """A role's actor died or raised; the message names the role and the phase."""


@dataclass
class Roles:
    rollout: Any
    actor_ref: Any
    reward: Any
    learner: Any
    placement_group: Any

    def handles(self) -> dict[str, Any]:
        return {
            "rollout": self.rollout,
            "actor_ref": self.actor_ref,
            "reward": self.reward,
            "learner": self.learner,
        }


def start_roles(loaded: LoadedConfig, plan: PlacementPlan, model_path: str) -> Roles:
    """Create the placement group and one actor per role (constructors run in parallel)."""
    cfg, derived = loaded.cfg, loaded.derived.as_dict()
    pg = create_placement_group(plan, cfg.placement.timeout_s)
    c = OmegaConf.to_container(cfg, resolve=True)

    def options(role: str) -> dict:
        res = cfg[role].resources
        accel = cfg.learner.accelerator if role == "learner" else "cpu"
        return {
            "num_cpus": float(res.cpus),
            "scheduling_strategy": role_strategy(pg, plan, role),
            "runtime_env": runtime_env(res.threads, accel),
        }

    with_actor = cfg.algorithm.old_log_prob_source == "actor"
    roles = Roles(
        rollout=ray.remote(RolloutWorker)
        .options(**options("rollout"))
        .remote(
            str(model_path),
            c["rollout"],
            c["data"],
            cfg.train.length_bucket,
            derived["prompts_per_pass_per_process"],
            cfg.trainer.seed,
        ),
        actor_ref=ray.remote(ActorRefWorker)
        .options(**options("actor_ref"))
        .remote(str(model_path), cfg.actor_ref.micro_batch_size, cfg.actor_ref.resources.threads, with_actor),
        reward=ray.remote(RewardWorker).options(**options("reward")).remote(c["reward"]),
        learner=ray.remote(LearnerWorker)
        .options(**options("learner"))
        .remote(str(model_path), c["train"], c["algorithm"], derived, cfg.rollout.temperature),
        placement_group=pg,
    )
    names = list(roles.handles())
    call(names, [h.ready.remote() for h in roles.handles().values()], "start-up")
    return roles


def call(role_names: Sequence[str], refs: Sequence[ray.ObjectRef], phase: str) -> list[Any]:
    """``ray.get`` the refs; a dead or failing actor becomes a :class:`RoleFailedError` naming it."""
    results = []
    for name, ref in zip(role_names, refs, strict=True):
        try:
            results.append(ray.get(ref))
        except ray.exceptions.RayActorError as exc:
            raise RoleFailedError(f"role '{name}' died during {phase}: {_first_line(exc)}") from exc
        except ray.exceptions.RayTaskError as exc:
            raise RoleFailedError(f"role '{name}' failed during {phase}: {_last_line(exc)}") from exc
    return results


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _last_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(exc).__name__


def stop_roles(roles: Roles | None) -> None:
    if roles is None:
        return
    for handle in roles.handles().values():
        ray.kill(handle, no_restart=True)
    ray.util.remove_placement_group(roles.placement_group)
