"""What each role's actors are constructed with, built from the config once roles start: one function per role,
named by its declaration (:mod:`relay.role_declarations`, ``settings``), each ``settings(start, slot) -> args``.

``start`` (:class:`StartContext`) is what every actor's settings may read: the loaded config, the model, the
namespace, the learner's settings (built once for every host) and a multi-host learner's coordinator address.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import OmegaConf

from placement.plan import ActorSlot, actor_copy_needed, actor_ref_computes_reference
from relay.config import LoadedConfig, RelayConfig
from relay.models.paths import reward_model_dir, solver_model_path
from relay.tasks.run_tasks import reward_role_config
from roles.actor_ref import ActorRefSettings
from roles.learner import JaxJob
from roles.reward import RewardSettings
from roles.reward_model_judge import judge_from_section
from roles.reward_model_settings import RewardModelSettings
from roles.rollout import RolloutSettings
from roles.tools import ToolsSettings


@dataclass(frozen=True)
class StartContext:
    """What the roles' settings are built from; ``learner`` is the run's
    :class:`relay.learner.settings.LearnerSettings`, ``coordinator`` the JAX coordinator of several learner hosts."""

    loaded: LoadedConfig
    model_path: str
    namespace: str
    learner: Any = None
    coordinator: str | None = None

    @property
    def cfg(self) -> RelayConfig:
        return self.loaded.cfg


def rollout_worker_settings(
    loaded: LoadedConfig, model_path: str, seed: int, namespace: str | None = None, with_lora: bool = True
) -> RolloutSettings:
    """A rollout replica's settings: the ``rollout``, ``data``, ``model.lora`` (unless ``with_lora`` is false: an
    evaluation of merged weights) and ``tools`` sections, its share of a pass's prompts, its seed; ``namespace``
    None runs the tools in the replica's process."""
    cfg, lora = loaded.cfg, loaded.cfg.model.lora
    return RolloutSettings(
        model_path=model_path,
        rollout=OmegaConf.to_object(cfg.rollout),
        data=OmegaConf.to_object(cfg.data),
        bucket=int(cfg.train.length_bucket),
        prompts_per_pass=int(loaded.derived.as_dict()["prompts_per_pass_per_process"]),
        seed=int(seed),
        lora=OmegaConf.to_object(lora) if lora is not None and with_lora else None,
        tools=OmegaConf.to_object(cfg.tools),
        namespace=namespace,
    )


def rollout_settings(start: StartContext, slot: ActorSlot) -> tuple[RolloutSettings]:
    """A rollout replica of the run: :func:`rollout_worker_settings`, replica ``r`` seeded ``trainer.seed + 1009 r``
    (replicas draw different samples)."""
    seed = start.cfg.trainer.seed + 1009 * slot.rank
    return (rollout_worker_settings(start.loaded, start.model_path, seed, start.namespace),)


def actor_ref_settings(start: StartContext, slot: ActorSlot) -> tuple[ActorRefSettings]:
    """An actor_ref rank: the models it holds (the reference, an actor copy) and the ``actor_ref`` section."""
    cfg = start.cfg
    settings = ActorRefSettings(
        model_path=start.model_path,
        micro_batch_size=int(cfg.actor_ref.micro_batch_size),
        reference=actor_ref_computes_reference(cfg),
        actor_copy=actor_copy_needed(cfg),
        threads=int(cfg.actor_ref.resources.threads),
        device=slot.device,
        ref_param_offload=bool(cfg.actor_ref.ref_param_offload),
        share_prompts=bool(cfg.actor_ref.share_prompts),
    )
    return (settings,)


def reward_worker_settings(cfg: RelayConfig, model_path: str) -> RewardSettings:
    """The reward actor's settings: the ``reward`` section, its tasks' graders, the solver model
    (``reward.mode=solver``), the seed and the longest response (the overlong penalty's)."""
    solver = str(solver_model_path(cfg, model_path)) if cfg.reward.mode == "solver" else None
    return RewardSettings.from_section(reward_role_config(cfg), solver_path=solver, seed=int(cfg.trainer.seed),
                                       max_response_length=int(cfg.data.max_response_length))  # fmt: skip


def reward_settings(start: StartContext, slot: ActorSlot) -> tuple[RewardSettings]:
    """The reward role: :func:`reward_worker_settings`."""
    return (reward_worker_settings(start.cfg, start.model_path),)


def reward_model_settings(start: StartContext, slot: ActorSlot) -> tuple[RewardModelSettings]:
    """The reward_model actor: the ``reward_model`` section."""
    rm = start.cfg.reward_model
    settings = RewardModelSettings(
        path=str(reward_model_dir(start.cfg)),  # absolute: the actor's working directory may not be the driver's
        kind=str(rm.kind),
        micro_batch_size=int(rm.micro_batch_size),
        max_length=int(rm.max_length),
        threads=int(rm.resources.threads),
        device=slot.device,
        engine=str(rm.engine),
        judge=judge_from_section(rm.judge) if rm.kind == "judge" else None,
        seed=int(start.cfg.trainer.seed),
    )
    return (settings,)


def tools_settings(start: StartContext, slot: ActorSlot) -> tuple[ToolsSettings]:
    """A tools worker: the ``tools`` section's limits and concurrency, and the tools ``rollout.agent.tools``
    allows."""
    section = OmegaConf.to_container(start.cfg.tools, resolve=True)
    return (ToolsSettings.from_section(section, start.cfg.rollout.agent.tools),)


def learner_settings(start: StartContext, slot: ActorSlot) -> tuple:
    """A learner host: the run's learner settings and, with several hosts, its place in the JAX job."""
    job = None
    if start.coordinator is not None:
        job = JaxJob(start.coordinator, int(start.cfg.learner.hosts), slot.rank)
    return (start.model_path, start.learner, job)
