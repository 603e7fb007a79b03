"""The step's derived metrics (driver/step_metrics.py): golden values, the docstrings' worked examples."""

from __future__ import annotations

import numpy as np
import pytest

from driver.step_metrics import (
    batch_metrics,
    collect_compute_seconds,
    derived_timing_metrics,
    memory_metrics,
    overlap_metrics,
    reward_metrics,
    staleness_metrics,
    sum_pass_metrics,
)
from relay.data_proto import DataProto


def _batch(scores: list[float], acc: list[float], lengths: list[int], **extra: np.ndarray) -> DataProto:
    n = len(scores)
    return DataProto.from_dict(
        batch={
            "scores": np.array(scores, np.float32),
            "acc": np.array(acc, np.float32),
            "response_length": np.array(lengths, np.int32),
            "prompts": np.zeros((n, 3), np.int32),
            "responses": np.zeros((n, 5), np.int32),
            **extra,
        }
    )


def test_batch_metrics_golden() -> None:
    m = batch_metrics(_batch([1.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0], [2, 4, 5, 1]))
    assert m == {
        "reward/mean": 0.5,
        "reward/std": 0.5,
        "reward/accuracy": 0.25,
        "response/length_mean": 3.0,
        "response/length_max": 5.0,
        "batch/sequences": 4.0,
        "batch/prompt_width": 3.0,
        "batch/response_width": 5.0,
    }


def test_reward_metrics_report_every_sample_drawn_under_dynamic_sampling() -> None:
    """The docstring's example: 8 samples drawn with mean 0.25, the 4 kept with 0.5."""
    kept = _batch([1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 1.0, 0.0], [1, 1, 1, 1])
    plain = reward_metrics(kept, {})
    assert plain["reward/mean"] == 0.5 and "reward/trained_mean" not in plain
    filtered = reward_metrics(kept, {"filter/sampled_reward_mean": 0.25, "filter/sampled_accuracy": 0.125})
    assert filtered["reward/mean"] == 0.25 and filtered["reward/trained_mean"] == 0.5
    assert filtered["reward/accuracy"] == 0.125 and filtered["reward/trained_accuracy"] == 0.5


def test_memory_metrics_sum_the_roles_peaks() -> None:
    m = {"memory/rollout_peak_rss_gib": 1.5, "memory/learner_peak_rss_gib": 2.25, "memory/other": 9.0}
    assert memory_metrics(m) == {"memory/roles_peak_rss_gib": 3.75}


def test_collect_compute_counts_the_overlapped_pair_once() -> None:
    m = {"timing/rollout_compute": 10.0, "timing/actor_ref_compute": 4.0, "timing/reward_compute": 3.0}
    assert collect_compute_seconds(m, side_by_side=True) == 14.0
    assert collect_compute_seconds(m, side_by_side=False) == 17.0


def test_overlap_saving_golden() -> None:
    m = {"timing/actor_ref_compute": 8.0, "timing/reward_compute": 5.0, "timing/actor_ref_and_reward": 9.0}
    out = overlap_metrics(m, overlapped=True)
    assert out["timing/reward_overlap_saving"] == 4.0
    assert out["timing/reward_overlap_saving_frac"] == pytest.approx(4 / 13)
    assert overlap_metrics(m, overlapped=False) == {
        "timing/reward_overlap_saving": 0.0,
        "timing/reward_overlap_saving_frac": 0.0,
    }


def test_derived_timing_golden() -> None:
    """The docstring's example: a 40 s step, collect 14, update 20, export 1, loads 2 (wall 2.5), grading 3."""
    m = {"timing/step": 40.0, "sync/export_seconds": 1.0, "timing/update_compute": 20.0, "timing/reward_compute": 3.0}
    out = derived_timing_metrics(m, collect_busy=14.0, sync_wall=2.5, sync_busy=2.0)
    assert out == {"sync/seconds": 3.5, "timing/reward_share_of_step": 0.075, "timing/driver_and_ray_overhead": 3.0}


def test_staleness_golden() -> None:
    batch = _batch([0.0, 1.0], [0.0, 1.0], [1, 1], weights_version=np.array([3, 3], np.int64))
    m = {"actor/rollout_is_weight": 0.9, "logprob_gap/rollout_vs_learner_mean": 0.01}
    assert staleness_metrics(m, batch, step=5) == {
        "offpolicy/staleness_mean": 2.0,
        "offpolicy/staleness_max": 2.0,
        "offpolicy/is_weight_mean": 0.9,
        "offpolicy/logprob_gap_mean_staleness_2": 0.01,
    }


def test_sequential_passes_add_times_and_keep_the_largest_memory() -> None:
    merged = sum_pass_metrics(
        [
            {"timing/rollout_compute": 2.0, "memory/rollout_peak_rss_gib": 1.5, "throughput/x": 10.0},
            {"timing/rollout_compute": 3.0, "memory/rollout_peak_rss_gib": 1.7, "throughput/x": 20.0},
        ]
    )
    assert merged == {"timing/rollout_compute": 5.0, "memory/rollout_peak_rss_gib": 1.7, "throughput/x": 15.0}
