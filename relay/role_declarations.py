"""What each role is, declared once: the one place a role's name, actor class, group, actors, memory estimate,
restart rule, weights and stale metric are written down (in the spirit of verl's ``Role`` enum and role->worker
mapping, as data).

Every layer reads its part of a declaration: the config checks read the names and which roles may share a bundle,
:mod:`placement.plan` each role's actors and bundles, :mod:`placement.memory` its memory estimate, the driver its actor
class, group kind and restart and weight rules, the timeline the order of the tracks. The declarations name their
actor class, group kind, slot builder and memory estimate by import path (``module:attribute``), so this module stays
pure (no Ray, torch or JAX) and below the layers whose code it names; :func:`resolve` imports one, and
``tests/relay/test_role_declarations.py`` resolves every path and checks each lives in the layer that calls it.

A new role is one declaration here, its actor module, its config section and its tests.

>>> [r.name for r in ROLE_DECLARATIONS]
['rollout', 'actor_ref', 'reward', 'reward_model', 'tools', 'learner']
>>> declaration("learner").restart, declaration("rollout").weights
('never', 'policy')
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Literal

from relay.metrics import system as sm

Restart = Literal["relay", "never"]
Weights = Literal["policy", "actor_copy", "none"]
Dispatch = Literal["rows", "first", "caller"]


@dataclass(frozen=True)
class RoleDeclaration:
    """One role. ``name`` is also its config section (``<name>.resources`` reserves each actor's CPUs, threads and
    memory) and the stem of its actors' names (``rollout-0``).

    - ``actor``, ``settings``, ``group``, ``slots``, ``memory``: import paths of the Ray actor class, the function
      building what each actor is constructed with (:mod:`driver.role_settings`: ``settings(start, slot) -> args``),
      the driver's group kind (:mod:`driver.role_calls`, or the plain :class:`driver.role_group.RoleGroup`), the
      function giving the plan's actors of the role (how many, with which devices: ``slots(cfg, make)``) and its
      memory estimate (``memory(inputs, slot, ram)``: :mod:`placement.memory`).
    - ``restart``: ``relay``: an actor that died or hung in a call is restarted by Ray (up to
      ``trainer.role_restarts``), given the synced weights and sent the call again; ``never``: its state (the
      optimizer's moments, the JAX job) would be lost, so a death ends the run and ``--resume`` goes on.
    - ``weights``: what it loads at a weight sync: ``policy`` every sync, ``actor_copy`` only when it holds an actor
      copy (``algorithm.old_log_prob_source=actor``), ``none`` never. ``version_key`` is the ``meta_info`` key its
      answers carry the weights version in, and ``stale_metric`` counts answers sent again because a restarted actor
      answered from older weights; ``load_metric`` is the seconds of its slowest load at a sync.
    - ``dispatch``: how its batch is shared out: ``rows`` (each actor a consecutive share of the rows, sizes differing
      by at most one; the answers stacked back in rank order), ``first`` (rank 0 takes the whole batch) or
      ``caller`` (not called by the driver: ``called_by``'s actors call it).
    - ``colocatable``: may share a bundle with other roles (``placement.colocate``); ``on_cpu``: ``placement.on_cpu``
      sets its reservation; ``jax``: its actors run JAX (the runtime environment's XLA flags and host devices);
      ``own_cores``: each replica pinned to its own block of ``<name>.resources.threads`` cores.
    """

    name: str
    summary: str
    actor: str
    settings: str
    group: str
    slots: str
    memory: str
    restart: Restart
    weights: Weights
    dispatch: Dispatch
    version_key: str | None = None
    stale_metric: str | None = None
    load_metric: str | None = None
    called_by: str | None = None
    colocatable: bool = True
    on_cpu: bool = True
    jax: bool = False
    own_cores: bool = False


ROLE_DECLARATIONS: tuple[RoleDeclaration, ...] = (
    RoleDeclaration(
        name="rollout",
        summary="samples rollout.n responses per prompt with per-token log-probs (vLLM, or the HF engine)",
        actor="roles.rollout:RolloutWorker",
        group="driver.role_calls:RolloutGroup",
        settings="driver.role_settings:rollout_settings",
        slots="placement.role_slots:rollout_slots",
        memory="placement.inference_memory:rollout_memory",
        restart="relay",
        weights="policy",
        dispatch="rows",
        version_key="weights_version",
        stale_metric=sm.RECOVERY_STALE_ROLLOUTS,
        load_metric=sm.SYNC_ROLLOUT_LOAD_SECONDS,
        own_cores=True,
    ),
    RoleDeclaration(
        name="actor_ref",
        summary="reference (and old-policy) log-probs of the sampled rows, when the learner does not compute them",
        actor="roles.actor_ref:ActorRefWorker",
        group="driver.role_calls:ActorRefGroup",
        settings="driver.role_settings:actor_ref_settings",
        slots="placement.role_slots:actor_ref_slots",
        memory="placement.inference_memory:actor_ref_memory",
        restart="relay",
        weights="actor_copy",
        dispatch="rows",
        version_key="actor_weights_version",
        stale_metric=sm.RECOVERY_STALE_ACTOR_COPIES,
        load_metric=sm.SYNC_ACTOR_LOAD_SECONDS,
    ),
    RoleDeclaration(
        name="reward",
        summary="grades the responses: answer extraction and math-verify, a solver model, or a user function",
        actor="roles.reward:RewardWorker",
        group="driver.role_calls:RewardGroup",
        settings="driver.role_settings:reward_settings",
        slots="placement.role_slots:reward_slots",
        memory="placement.inference_memory:reward_memory",
        restart="relay",
        weights="none",
        dispatch="first",
    ),
    RoleDeclaration(
        name="reward_model",
        summary="scores each (question, response) with a model, a classifier or an LLM judge; reward.sources weighs it",
        actor="roles.reward_model:RewardModelWorker",
        settings="driver.role_settings:reward_model_settings",
        group="driver.role_calls:RewardModelGroup",
        slots="placement.role_slots:reward_model_slots",
        memory="placement.inference_memory:reward_model_memory",
        restart="relay",
        weights="none",
        dispatch="rows",
    ),
    RoleDeclaration(
        name="tools",
        summary="runs the agent loop's tool calls in sandboxed processes (rollout.agent.enable)",
        actor="roles.tools:ToolsWorker",
        group="driver.role_group:RoleGroup",
        settings="driver.role_settings:tools_settings",
        slots="placement.role_slots:tools_slots",
        memory="placement.inference_memory:tools_memory",
        restart="relay",
        weights="none",
        dispatch="caller",
        called_by="rollout",
        colocatable=False,
        on_cpu=False,
    ),
    RoleDeclaration(
        name="learner",
        summary="the JAX/optax update on learner.hosts hosts; rank 0 publishes the new weights",
        actor="roles.learner:LearnerWorker",
        group="driver.role_calls:LearnerGroup",
        settings="driver.role_settings:learner_settings",
        slots="placement.role_slots:learner_slots",
        memory="placement.learner_memory:learner_memory",
        restart="never",
        weights="none",
        dispatch="rows",
        jax=True,
    ),
)

ROLE_NAMES: tuple[str, ...] = tuple(r.name for r in ROLE_DECLARATIONS)
_BY_NAME = {r.name: r for r in ROLE_DECLARATIONS}


def declaration(role: str) -> RoleDeclaration:
    """``role``'s declaration; an unknown name is a KeyError listing the roles."""
    if role not in _BY_NAME:
        raise KeyError(f"unknown role {role!r}; roles are {', '.join(ROLE_NAMES)}")
    return _BY_NAME[role]


def resolve(path: str) -> Any:
    """The object an import path names: ``resolve("relay.role_declarations:declaration")`` is :func:`declaration`."""
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


def holds_weights(role: str, actor_copy: bool) -> bool:
    """Whether ``role``'s actors load the learner's weights at a sync; ``actor_copy``: the actor_ref ranks hold an
    actor copy (``algorithm.old_log_prob_source=actor``).

    >>> holds_weights("rollout", False), holds_weights("actor_ref", False), holds_weights("actor_ref", True)
    (True, False, True)
    """
    weights = declaration(role).weights
    return weights == "policy" or (weights == "actor_copy" and actor_copy)


def colocatable_roles() -> tuple[str, ...]:
    """The roles ``placement.colocate`` may name."""
    return tuple(r.name for r in ROLE_DECLARATIONS if r.colocatable)


def track_order() -> tuple[str, ...]:
    """The roles in declaration order, each followed by the roles its actors call (the timeline's tracks).

    >>> track_order()
    ('rollout', 'tools', 'actor_ref', 'reward', 'reward_model', 'learner')
    """
    out: list[str] = []
    for r in ROLE_DECLARATIONS:
        if r.called_by is None:
            out += [r.name, *(c.name for c in ROLE_DECLARATIONS if c.called_by == r.name)]
    return tuple(out)
