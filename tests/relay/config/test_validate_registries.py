"""The config's menus of names are the code's registries: a name registered in code is valid config with no change to
relay/config/validate.py or validate_algorithm.py, and a refusal lists exactly the registered names."""

from collections.abc import Iterable, Iterator

import numpy as np
import pytest

from relay.config import load_config
from relay.grpo import ADVANTAGE_ESTIMATORS, POLICY_LOSSES, register_advantage, register_policy_loss
from relay.grpo.kl_controller import KL_CTRL_TYPES
from relay.learner.optimizer import LR_SCHEDULES, OPTIMIZERS
from tests.relay.config.loading import NO_ENV, refusal_lines


def _assert_a_valid_name_and_the_menu(key: str, registered: str, menu: Iterable[str], unknown: str) -> None:
    """``algorithm.<key>=<registered>`` loads; ``<unknown>`` is refused with all of ``menu`` named, and the
    refusal's last line names ``registered``."""
    loaded = load_config(overrides=[f"algorithm.{key}={registered}"], environ=NO_ENV)
    assert getattr(loaded.cfg.algorithm, key) == registered
    lines = refusal_lines([f"algorithm.{key}={unknown}"])
    assert f"algorithm.{key}='{unknown}': must be one of {', '.join(menu)}" in lines
    assert registered in lines[-1]


@pytest.fixture
def registered_estimator() -> Iterator[str]:
    name = "test_zero_advantage"

    @register_advantage(name)
    def zero(scores, uids, response_mask, options):
        return np.zeros(np.shape(response_mask), np.float32), np.zeros(len(scores), np.float32)

    yield name
    ADVANTAGE_ESTIMATORS.remove(name)


@pytest.fixture
def registered_policy_loss() -> Iterator[str]:
    name = "test_zero_loss"

    @register_policy_loss(name)
    def zero(inputs, config):
        return 0.0 * inputs.log_probs, {}

    yield name
    POLICY_LOSSES.remove(name)


def test_a_registered_estimator_is_valid_config(registered_estimator: str) -> None:
    _assert_a_valid_name_and_the_menu("adv_estimator", registered_estimator, ADVANTAGE_ESTIMATORS, "gae")


def test_a_registered_policy_loss_is_valid_config(registered_policy_loss: str) -> None:
    _assert_a_valid_name_and_the_menu("policy_loss", registered_policy_loss, POLICY_LOSSES, "ppo2")


def test_an_unregistered_name_is_refused() -> None:
    assert "test_zero_advantage" not in ADVANTAGE_ESTIMATORS and "test_zero_loss" not in POLICY_LOSSES
    for key, name in (("adv_estimator", "test_zero_advantage"), ("policy_loss", "test_zero_loss")):
        lines = refusal_lines([f"algorithm.{key}={name}"])
        assert any(line.startswith(f"algorithm.{key}='{name}': must be one of") for line in lines)


@pytest.mark.parametrize(
    ("key", "names", "expected"),
    [
        ("train.optimizer.name", tuple(OPTIMIZERS), ("adamw", "lion", "sgd")),
        ("train.optimizer.lr_schedule.type", tuple(LR_SCHEDULES), ("constant", "warmup_cosine")),
        ("algorithm.kl_ctrl.type", KL_CTRL_TYPES, ("fixed", "adaptive")),
    ],
)
def test_the_menu_is_the_modules(key: str, names: tuple[str, ...], expected: tuple[str, ...]) -> None:
    assert names == expected
    assert f"{key}='nope': must be one of {', '.join(names)}" in refusal_lines([f"{key}=nope"])
