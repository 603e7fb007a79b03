"""reward.sources: golden sums, the identity left alone, and every refusal naming its key."""

from __future__ import annotations

import numpy as np
import pytest

from relay.scoring.reward_sources import RewardSource, combine, sources_problems, transformed

GRADES = np.array([1.0, 0.0, 1.0, 0.0], np.float32)
MODEL = np.array([3.0, 1.0, 2.0, 2.0], np.float32)


def test_the_default_source_returns_the_grades_themselves() -> None:
    scores, metrics = combine({"reward": GRADES}, [RewardSource()])
    assert scores is GRADES and metrics == {}  # the default run's metrics are what they were


def test_golden_weighted_sum_with_a_normalised_model() -> None:
    scores, metrics = combine(
        {"reward": GRADES, "reward_model": MODEL}, [RewardSource(), RewardSource("reward_model", 0.5, "batch")]
    )
    np.testing.assert_allclose(scores, [1 + 0.5 * 2**0.5, -0.5 * 2**0.5, 1.0, 0.0], rtol=1e-6)
    assert scores.dtype == np.float32
    assert metrics["reward/source_reward_model_mean"] == pytest.approx(0.0, abs=1e-7)


def test_normalising_a_constant_source_gives_zeros_and_clip_bounds_after_it() -> None:
    assert transformed(np.full(3, 7.0), RewardSource("reward_model", 1.0, "batch")).tolist() == [0.0, 0.0, 0.0]
    clipped = transformed(MODEL, RewardSource("reward_model", 1.0, "none", (1.5, 2.5)))
    assert clipped.tolist() == [2.5, 1.5, 2.0, 2.0]
    alone, _ = combine({"reward_model": MODEL}, [RewardSource("reward_model", 2.0)])
    assert alone.tolist() == [6.0, 2.0, 4.0, 4.0]


@pytest.mark.parametrize(
    ("entries", "enabled", "message"),
    [
        ([], False, "reward.sources is empty"),
        ([{"source": "judge", "weight": 1.0, "normalize": "none"}], False, "reward.sources[0].source='judge': unknown"),
        ([{"source": "reward", "weight": 1.0, "normalize": "rank"}], False, "reward.sources[0].normalize='rank'"),
        ([{"source": "reward", "weight": 1.0, "normalize": "none", "clip": [1, 0]}], False, "low < high"),
        ([{"source": "reward", "weight": 0.0, "normalize": "none"}], False, "they sum to nothing"),
        ([{"source": "reward", "weight": 1.0, "normalize": "none"}] * 2, False, "names a source twice"),
        ([{"source": "reward_model", "weight": 1.0, "normalize": "none"}], False, "reward_model.enable is false"),
        ([{"source": "reward", "weight": 1.0, "normalize": "none"}], True, "does not name it"),
    ],
)
def test_bad_sources_are_refused_naming_the_key(entries, enabled, message) -> None:
    problems = sources_problems(entries, enabled)
    assert any(message in p for p in problems), problems


def test_good_sources_pass() -> None:
    both = [{"source": "reward", "weight": 1.0, "normalize": "none"}, {"source": "reward_model", "weight": 0.5,
            "normalize": "batch", "clip": [-3.0, 3.0]}]  # fmt: skip
    assert sources_problems(both, True) == []
    assert sources_problems(both[:1], False) == []
