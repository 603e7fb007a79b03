"""The hard-level presets and their curricula: each curriculum preset ends at its direct preset's task with the same
seeds (so both arms of ``benchmarks.learning.relay_vs_trl --curriculum`` are judged on the same held-out problems),
every level generates rows, and no level trains on a problem the direct preset holds out."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from relay.config import load_config
from relay.repo import CONFIGS_DIR
from relay.tasks.curriculum import level_data
from relay.tasks.run_tasks import RunTasks

PAIRS = [
    ("arithmetic_3digit_smollm2.yaml", "arithmetic_3digit_curriculum_smollm2.yaml"),
    ("chain_sum_smollm2.yaml", "chain_sum_curriculum_smollm2.yaml"),
]
SMALL = ["data.generate.train_size=300", "data.generate.test_size=50"]


@pytest.mark.parametrize(("direct", "curriculum"), PAIRS)
def test_the_curriculum_ends_at_the_direct_presets_task(direct: str, curriculum: str) -> None:
    direct_data = load_config(CONFIGS_DIR / direct, SMALL, environ={}).cfg.data
    curriculum_data = load_config(CONFIGS_DIR / curriculum, SMALL, environ={}).cfg.data
    assert not direct_data.curriculum.levels and len(curriculum_data.curriculum.levels) >= 2
    last = OmegaConf.to_container(curriculum_data.curriculum.levels[-1].options, resolve=True)
    assert last == OmegaConf.to_container(direct_data.generate.options, resolve=True)
    assert curriculum_data.generate.test_seed == direct_data.generate.test_seed

    held_out = {ex.question for ex in RunTasks.from_config(direct_data).read(None, "test")}
    assert len(held_out) == 50
    for index in range(len(curriculum_data.curriculum.levels)):
        level = RunTasks.from_config(level_data(curriculum_data, index))
        train = {ex.question for ex in level.read(None, "train", quiet=True)}
        assert train and not train & held_out
