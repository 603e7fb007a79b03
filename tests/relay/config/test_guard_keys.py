"""The guard keys: train.max_consecutive_skips, data.max_prompt_chars, reward.blocklist are checked at load."""

import pytest

from relay.config import load_config
from tests.relay.config.loading import NO_ENV, assert_refused


def test_guard_defaults() -> None:
    cfg = load_config(environ=NO_ENV).cfg
    assert (cfg.train.max_consecutive_skips, cfg.data.max_prompt_chars, list(cfg.reward.blocklist)) == (3, 0, [])


def test_guard_values_load() -> None:
    cfg = load_config(
        overrides=["train.max_consecutive_skips=1", "data.max_prompt_chars=500", "reward.blocklist=[ignore, '<tool>']"],
        environ=NO_ENV,
    ).cfg
    assert (cfg.train.max_consecutive_skips, cfg.data.max_prompt_chars) == (1, 500)
    assert list(cfg.reward.blocklist) == ["ignore", "<tool>"]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("train.max_consecutive_skips=0", r"train.max_consecutive_skips=0: must be >= 1"),
        ("data.max_prompt_chars=-1", r"data.max_prompt_chars=-1: must be >= 0"),
        ("reward.blocklist=[ok, '']", r"reward.blocklist\[1\]='': an empty substring is in every response"),
    ],
)
def test_guard_values_are_refused(override: str, message: str) -> None:
    assert_refused([override], message)
