"""Every preset in configs/ runs end to end on this machine, with a tiny random model of its own model's family and
on-disk layout and its devices mapped to the CPU by ``placement.on_cpu``.

The Qwen2.5 presets get a tied tiny Qwen2 saved as Qwen2.5 ships (bfloat16, two safetensors shards and an index);
the SmolLM2 ones a tied float32 tiny Llama. Each run keeps the preset's layout (roles, replicas, colocation, learner
devices and mesh, batch arithmetic, algorithm) and shrinks only the sequence lengths: placement, the vLLM rollout,
the reference, the reward, two learner updates with their weight syncs, a checkpoint and its HF export, which
transformers and vLLM then load. A preset whose learner spans two hosts runs on a two-node Ray cluster started
here (``ray start``, :mod:`benchmarks.harness.ray_head`), one learner process per node. This module: the SmolLM2
presets; the Qwen ones are ``tests/test_presets_qwen.py`` and ``tests/test_two_nodes.py`` (the 2-host preset).
"""

from __future__ import annotations

import pytest

from relay.repo import CONFIGS_DIR
from tests.presets import NEEDS_TWO_NODES, PRESETS, SMOLLM2_PRESETS, check_preset_run, preset_params


def test_every_preset_is_run_here() -> None:
    presets = sorted(p.name for p in CONFIGS_DIR.glob("*.yaml"))
    assert presets == sorted([*PRESETS, *NEEDS_TWO_NODES])


@pytest.mark.parametrize("preset", preset_params(SMOLLM2_PRESETS))
def test_the_preset_runs_two_steps_on_the_cpu(preset: str, preset_run) -> None:
    check_preset_run(*preset_run(preset))
