"""Config: precedence, preset inheritance, and errors that name the key, the value and the fix."""

from pathlib import Path

import pytest

from relay.config import ConfigError, load_config

REPO = Path(__file__).resolve().parents[3]


def test_defaults_validate_and_are_read_only() -> None:
    cfg = load_config()
    assert cfg.rollout.batch_size == 8 and cfg.rollout.n == 4  # schema defaults (no preset)
    with pytest.raises(Exception):  # noqa: B017 - omegaconf's ReadonlyConfigError
        cfg.rollout.n = 3


def test_preset_extends_and_overrides_win(tmp_path: Path) -> None:
    base = tmp_path / "base.yaml"
    base.write_text("rollout:\n  n: 6\n  batch_size: 2\nlearner:\n  micro_batch_size: 4\n")
    child = tmp_path / "child.yaml"
    child.write_text("extends: base.yaml\nrollout:\n  n: 8\n")
    cfg = load_config(child, ["rollout.temperature=0.7"])
    assert (cfg.rollout.n, cfg.rollout.batch_size, cfg.rollout.temperature) == (8, 2, 0.7)
    cfg = load_config(child, ["rollout.n=2"])
    assert cfg.rollout.n == 2


def test_shipped_presets_load() -> None:
    for preset in sorted((REPO / "configs").glob("*.yaml")):
        load_config(preset)


def test_unknown_key_suggests_nearest() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown config key 'rollout.temprature'.*did you mean 'rollout.temperature'"
    ):
        load_config(overrides=["rollout.temprature=0.5"])


def test_unknown_key_in_preset_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("learner:\n  lrr: 0.1\n")
    with pytest.raises(ConfigError, match=r"'learner.lrr' \(from .*bad.yaml\)"):
        load_config(bad)


def test_wrong_type_names_key_and_value() -> None:
    with pytest.raises(ConfigError, match=r"rollout.n: wrong type .*'abc'"):
        load_config(overrides=["rollout.n=abc"])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("rollout.n=1", r"rollout.n=1: GRPO needs at least 2"),
        ("rollout.temperature=0", r"rollout.temperature=0.0: must be > 0"),
        (
            "learner.micro_batch_size=5",
            r"learner.micro_batch_size=5: must divide .* = 32\); valid values: \[1, 2, 4",
        ),
        ("reward.mode=function", r"reward.function is empty but reward.mode=function"),
        ("algorithm.kl_loss_type=k9", r"algorithm.kl_loss_type='k9': must be one of"),
        ("learner.ppo_epochs=2", r"set algorithm.old_log_prob_source=actor"),
        ("rollout.engine=sglang", r"rollout.engine='sglang'"),
    ],
)
def test_out_of_range_values_are_refused(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(overrides=[override])


def test_override_syntax_and_missing_preset(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="expected key=value"):
        load_config(overrides=["rollout.n"])
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")
    loop = tmp_path / "loop.yaml"
    loop.write_text("extends: loop.yaml\n")
    with pytest.raises(ConfigError, match="loops back"):
        load_config(loop)
