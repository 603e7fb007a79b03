"""relay.tasks.curriculum: when a level rises (golden), each level's prompts and validation split, the resumable
state, and the config refusals."""

from __future__ import annotations

import re

import pytest
from omegaconf import OmegaConf

from relay.config.data_schema import DataConfig
from relay.tasks.curriculum import Curriculum, CurriculumSource, curriculum_validation_prompts, level_data
from tests.relay.config.loading import refusal_lines
from tests.relay.data.char_prompts import CharTokenizer

pytest.importorskip("reasoning_gym")


def _sums(digits: int) -> dict:
    config = {"min_terms": 2, "max_terms": 2, "max_digits": digits, "operators": ["+"], "allow_negation": False}
    return {"datasets": [{"name": "basic_arithmetic", "config": config}]}


LEVELS = [{"name": "d1", "options": _sums(1)}, {"name": "d2", "options": _sums(2)}]


def _data(**curriculum: object):
    return OmegaConf.merge(
        OmegaConf.structured(DataConfig),
        {
            "task": "reasoning_gym",
            "train_path": None,
            "test_path": None,
            "generate": {"seed": 1, "test_seed": 1_000_000, "train_size": 40, "test_size": 8},
            "curriculum": {"levels": LEVELS, "promote_at": 0.8, "window": 2, **curriculum},
        },
    )


def test_observe_golden() -> None:
    """The module docstring's example: the window must be full and its mean at the threshold; never past the last."""
    c = Curriculum(["a", "b"], promote_at=0.8, window=2)
    first = c.observe(0.5)
    assert first == {
        "curriculum/level": 0.0,
        "curriculum/window_accuracy": 0.5,
        "curriculum/promoted": 0.0,
    }
    assert c.observe(0.9)["curriculum/promoted"] == 0.0  # mean 0.7
    promoted = c.observe(0.9)  # window [0.9, 0.9]
    assert promoted["curriculum/level"] == 0.0 and promoted["curriculum/promoted"] == 1.0
    assert (c.level, c.name, c.recent) == (1, "b", [])
    assert [c.observe(1.0)["curriculum/promoted"] for _ in range(3)] == [0.0, 0.0, 0.0]  # the last level


def test_a_zero_threshold_is_a_schedule_of_window_steps_per_level() -> None:
    c = Curriculum(["a", "b", "c"], promote_at=0.0, window=2)
    assert [c.observe(0.0)["curriculum/level"] for _ in range(6)] == [0, 0, 1, 1, 2, 2]


def test_each_level_serves_its_own_prompts_and_the_state_resumes() -> None:
    source = CurriculumSource.from_config(_data(promote_at=0.0, window=1), CharTokenizer(), batch_size=4)
    first = source.next_batch()
    assert set(first.non_tensor["subset"]) == {"d1"}
    terms = [int(n) for q in first.non_tensor["question"] for n in re.findall(r"\d+", q)]
    assert max(terms) <= 10  # reasoning-gym's one-digit terms are 0..10
    state = source.state_dict()
    assert source.observe(0.0)["curriculum/promoted"] == 1.0
    second = source.next_batch()
    assert set(second.non_tensor["subset"]) == {"d2"}

    again = CurriculumSource.from_config(_data(promote_at=0.0, window=1), CharTokenizer(), batch_size=4)
    again.load_state_dict(state)
    again.observe(0.0)
    assert list(again.next_batch().non_tensor["question"]) == list(second.non_tensor["question"])
    with pytest.raises(ValueError, match="not a curriculum of 2 levels"):
        again.load_state_dict({"epoch": 0, "position": 0})


def test_validation_keeps_one_fixed_split_per_level() -> None:
    prompts = curriculum_validation_prompts(_data(), CharTokenizer(), limit=3)
    assert list(prompts.non_tensor["subset"]) == ["d1"] * 3 + ["d2"] * 3
    assert len(set(prompts.non_tensor["uid"])) == 6 and prompts.non_tensor["uid"][0].startswith("d1/")
    assert list(prompts.non_tensor["reference_answer"][:3]) != list(prompts.non_tensor["reference_answer"][3:])
    assert level_data(_data(), 1).generate.options.datasets[0].config.max_digits == 2


def test_no_levels_validation_problem_reaches_any_levels_training() -> None:
    """Level d2 (1-2 digit terms) trains on one-digit sums too, and level d1's validation split is one-digit sums:
    every level's training rows leave out every level's validation problems, not only their own (without that,
    d2's rows repeat some of d1's held-out problems)."""
    from dataclasses import replace

    from relay.tasks.run_tasks import RunTasks

    plain = [  # no parentheses (with them reasoning-gym also writes negative terms): small spaces that overlap
        {
            "name": name,
            "options": {"datasets": [{"name": "basic_arithmetic", "config": {**sums, "allow_parentheses": False}}]},
        }
        for name, sums in (("d1", _sums(1)["datasets"][0]["config"]), ("d2", _sums(2)["datasets"][0]["config"]))
    ]
    data = _data(levels=plain)
    data.generate.train_size, data.generate.test_size = 2000, 40  # d2's one-digit rows cover the ~121 sums
    levels = [RunTasks.from_config(level_data(data, i)) for i in range(len(plain))]
    held_out = {ex.question for tasks in levels for ex in tasks.read(None, "test")}
    for tasks in levels:
        assert not {ex.question for ex in tasks.read(None, "train", quiet=True)} & held_out
    own_only = replace(levels[1], held_out_options=())
    assert {ex.question for ex in own_only.read(None, "train", quiet=True)} & held_out  # what the union removes


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["data.curriculum.levels=[{name: a}]"], "data.curriculum.levels[0]={'name': 'a'}: needs a name and options"),
        (["data.curriculum.promote_at=1.5"], "data.curriculum.promote_at=1.5: must be in [0, 1]"),
        (["trainer.max_staleness=1"], "trainer.max_staleness=1 with data.curriculum: the next step's level follows"),
        (
            ["data.curriculum.levels=[{name: a, options: {datasets: [{name: basic_arithmetc}]}}]"],
            "data.curriculum.levels[0].options.datasets[0].name='basic_arithmetc': no such reasoning-gym dataset",
        ),
    ],
)
def test_bad_curricula_are_refused_naming_the_key(overrides: list[str], expected: str) -> None:
    base = [
        "data.task=reasoning_gym",
        "data.train_path=null",
        "data.test_path=null",
        "data.generate.test_seed=1000000",
        "data.generate.options.datasets=[{name: chain_sum}]",
        "data.curriculum.levels=[{name: a, options: {datasets: [{name: chain_sum}]}}]",
    ]
    lines = refusal_lines([*base, *overrides])
    assert any(expected in line for line in lines), lines


def test_a_file_task_cannot_have_a_curriculum() -> None:
    lines = refusal_lines(["data.curriculum.levels=[{name: a, options: {}}]"])
    assert any("a curriculum raises a generated task's difficulty, but data.task=gsm8k" in line for line in lines)
