"""The reward role grades each row with its task's grader: the run's task (``data.task``, or ``reward.grader``)
and, in a dataset that mixes tasks, the task each row's ``data_source`` names."""

import numpy as np
from omegaconf import OmegaConf

from relay.config.schema import RelayConfig, RewardConfig
from relay.data_proto import DataProto
from relay.tasks.run_tasks import reward_role_config
from roles.reward import RewardSettings, RewardWorker


def _worker(**overrides: object) -> RewardWorker:
    cfg = OmegaConf.merge(OmegaConf.structured(RelayConfig), {"reward": {"workers": 0}}, overrides)
    return RewardWorker(RewardSettings.from_section(reward_role_config(cfg)))


def _rows(texts: list[str], truths: list[str], sources: list[str] | None = None) -> DataProto:
    non_tensor = {"response_text": np.array(texts, object), "ground_truth": np.array(truths, object)}
    if sources is not None:
        non_tensor["data_source"] = np.array(sources, object)
    return DataProto.from_dict(non_tensor=non_tensor)


def test_the_run_task_grader_grades_every_row() -> None:
    worker = _worker(data={"task": "math"})
    out = worker.score(_rows(["so \\boxed{\\frac{1}{2}}", "\\boxed{0.4}", "#### 0.5"], ["0.5", "0.5", "0.5"]))
    np.testing.assert_array_equal(out.batch["acc"], [1.0, 0.0, 0.0])  # math reads \boxed{}, not '####'


def test_mixed_rows_are_graded_by_their_own_tasks() -> None:
    worker = _worker(data={"task": "math", "fields": {"data_source": "src"}})
    texts = ["\\boxed{2\\sqrt{3}}", "#### 5", "\\boxed{(7-3)*5}", "\\boxed{paris}"]
    truths = ["\\sqrt{12}", "5", "3,5,7=20", "Paris"]
    out = worker.score(_rows(texts, truths, ["math", "gsm8k", "countdown", "exact"]))
    np.testing.assert_array_equal(out.batch["acc"], [1.0, 1.0, 1.0, 1.0])
    swapped = worker.score(_rows(texts[1:3], truths[1:3], ["math", "exact"]))  # graded as other tasks: wrong
    np.testing.assert_array_equal(swapped.batch["acc"], [0.0, 0.0])


def test_reward_grader_and_its_options_replace_the_task_grader() -> None:
    worker = _worker(data={"task": "exact"}, reward={"grader": "regex", "grader_options": {"pattern": "Choice: (\\w)"}})
    out = worker.score(_rows(["Choice: B", "Choice: C", "\\boxed{B}"], ["b", "b", "b"]))
    np.testing.assert_array_equal(out.batch["acc"], [1.0, 0.0, 0.0])


def test_a_reward_config_without_grading_grades_gsm8k() -> None:
    worker = RewardWorker(RewardSettings(RewardConfig(workers=0)))
    out = worker.score(_rows(["#### 4", "\\boxed{4}", "#### 5"], ["4", "4", "4"]))
    np.testing.assert_array_equal(out.batch["acc"], [1.0, 1.0, 0.0])


def test_the_lenient_reading_only_when_validation_asks_for_it() -> None:
    """Validation's chunks (``meta_info["lenient"]``) get ``acc_lenient``; training's grading stays strict only, and a
    blocked response is wrong in every reading."""
    worker = _worker(data={"task": "exact"}, reward={"blocklist": ["hack"]})
    rows = _rows(["\\boxed{8}", "5 + 3 = 8", "hack: 8", "it is 7"], ["8"] * 4)
    assert "acc_lenient" not in worker.score(rows).batch
    rows.meta_info["lenient"] = True
    out = worker.score(rows)
    np.testing.assert_array_equal(out.batch["acc"], [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(out.batch["acc_lenient"], [1.0, 1.0, 0.0, 0.0])
