"""benchmarks.learning.algorithms' pure parts: the arm overrides load as a config, and the step a threshold is
passed."""

import pytest

from benchmarks.learning.algorithms import ESTIMATORS, LOSSES, first_passing, toy_overrides
from relay.config import load_config
from relay.repo import REPO_ROOT


def test_first_passing_golden() -> None:
    assert first_passing([0.1, 0.6, 0.7, 0.9, 1.0], 0.8, window=2) == 3
    assert first_passing([0.1, 0.2], 0.9, window=2) is None


@pytest.mark.parametrize("mini_batches", [1, 2, 4])
@pytest.mark.parametrize("arm", [f"estimator:{e}" for e in ESTIMATORS] + [f"loss:{x}" for x in LOSSES])
def test_every_arm_is_a_valid_config(arm: str, mini_batches: int, tmp_path) -> None:
    """What the benchmark loads, before any Ray actor starts (the model path is not read by the validation)."""
    load_config(REPO_ROOT / "configs" / "tiny.yaml", toy_overrides(tmp_path, arm, mini_batches, 0), environ={})
