"""benchmarks.learning.algorithm_gsm8k's bookkeeping: every arm's config loads, the slope, summaries and the report.

The arms themselves (a quarter hour of training each) are the benchmark, not a test."""

from __future__ import annotations

import argparse
import math

import pytest

from benchmarks.learning.algorithm_gsm8k import ARMS, PRESET, arm_summary, main, report, reward_slope, shared_settings
from benchmarks.learning.relay_vs_trl import compare, held_out
from tests.benchmarks.learning.test_relay_vs_trl import _metrics


@pytest.mark.parametrize("arm", sorted(ARMS))
def test_every_arm_is_a_valid_config_of_the_learning_preset(arm: str) -> None:
    from relay.config import load_config

    cfg = load_config(PRESET, [*shared_settings(2), *ARMS[arm]]).cfg
    assert cfg.train.mini_batch_size == 2
    for setting in shared_settings(2)[1:] + ARMS[arm]:
        key, value = setting.split("=")
        section, name = key.split(".")
        assert str(cfg[section][name]) == value


def test_reward_slope_matches_a_hand_fit() -> None:
    # x = 0, 1, 2, 3; y = 0, 1, 1, 2: dx = -1.5, -0.5, 0.5, 1.5 and dy = -1, 0, 0, 1 about the means 1.5 and 1;
    # Sxy = 1.5 + 0 + 0 + 1.5 = 3, Sxx = 5, slope 0.6.
    # residuals dy - 0.6 dx = -0.1, 0.3, -0.3, 0.1: SSE 0.2, se = sqrt(0.2 / 2 / 5) = 0.141421.
    slope, se = reward_slope([(0.0, 0.0), (1.0, 1.0), (2.0, 1.0), (3.0, 2.0)])
    assert slope == pytest.approx(0.6) and se == pytest.approx(math.sqrt(0.02))
    assert all(math.isnan(v) for v in reward_slope([(0.0, 0.0), (1.0, 1.0)]))


def test_summary_and_report() -> None:
    rows = [{"reward/mean": 0.1 * i, "time/elapsed_s": 60.0 * i, "actor/kl": 0.01} for i in range(20)]
    grpo = held_out("grpo", _metrics(0.02, 0.9), 19.0)
    cispo = held_out("cispo", _metrics(0.03, 0.95), 19.0)
    summary = arm_summary("cispo", rows, cispo)
    assert summary["steps"] == 20 and summary["seconds_per_step"] == pytest.approx(57.0)
    assert summary["reward_first10"] == pytest.approx(0.45) and summary["reward_last10"] == pytest.approx(1.45)
    assert summary["reward_slope_per_min"] == pytest.approx(0.1) and summary["reward_slope_se"] == pytest.approx(0)
    results = {
        "problems": 200,
        "machine": "x86_64, 2 cores, no GPU",
        "date": "2026-11-24",
        "held_out": {"base": held_out("base", _metrics(0.0, 0.25), 0.0), "grpo": grpo, "cispo": cispo},
        "arms": {"grpo": arm_summary("grpo", rows, grpo), "cispo": summary},
        "minus_grpo": {"cispo": {key: compare(cispo, grpo, key) for key in ("accuracy", "format_rate")}},
    }
    args = argparse.Namespace(config=PRESET, minutes=15.0, mini_batch=2)
    section = report(args, results)
    assert "--minutes 15.0 --mini-batch 2" in section
    assert "| cispo | `algorithm.policy_loss=cispo` | 20 | 57.0 |" in section
    assert "- `cispo`: accuracy +0.010" in section


def test_unknown_arm_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--arms", "grpo,ppo"]) == 2
    assert "unknown ['ppo']" in capsys.readouterr().err
