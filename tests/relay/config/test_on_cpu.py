"""``placement.on_cpu``: a GPU or TPU preset's layout on this machine's CPUs, with the rest of the preset kept."""

from __future__ import annotations

import doctest

from placement.plan import build_plan
from relay.config import load_config, on_cpu
from relay.repo import CONFIGS_DIR


def test_the_devices_move_to_the_cpu_and_nothing_else_changes() -> None:
    preset = CONFIGS_DIR / "gsm8k_qwen25_3b_4gpu.yaml"
    gpu = load_config(preset, environ={})
    cpu = load_config(preset, ["placement.on_cpu=true"], environ={})
    assert (cpu.cfg.rollout.gpus_per_replica, cpu.cfg.actor_ref.gpus, cpu.cfg.reward.gpus) == (0, 0, 0)
    assert cpu.cfg.learner.accelerator == "cpu" and cpu.cfg.rollout.enforce_eager
    # the layout and the batch arithmetic are the preset's
    assert cpu.cfg.learner.devices_per_host == gpu.cfg.learner.devices_per_host == 2
    assert list(cpu.cfg.placement.colocate) == list(gpu.cfg.placement.colocate)
    assert cpu.derived == gpu.derived
    assert cpu.sources["actor_ref.gpus"] == "placement.on_cpu" and cpu.sources["rollout.n"].startswith("preset")
    devices = {slot.name: slot.device for slot in build_plan(cpu.cfg).slots}
    assert set(devices.values()) == {"cpu"} and "learner-0" in devices


def test_it_wins_over_a_set_device() -> None:
    loaded = load_config(overrides=["rollout.gpus_per_replica=1", "placement.on_cpu=true"], environ={})
    assert loaded.cfg.rollout.gpus_per_replica == 0


def test_docstring_examples() -> None:
    assert doctest.testmod(on_cpu).failed == 0
