"""Merging one role's metrics over its ranks (golden values from the docstring)."""

from relay.rank_metrics import merge_rank_metrics


def test_docstring_example() -> None:
    merged = merge_rank_metrics(
        [
            {"throughput/x_tokens_per_s": 100.0, "timing/x_compute": 2.0, "memory/x_peak_rss_gib": 1.0},
            {"throughput/x_tokens_per_s": 80.0, "timing/x_compute": 3.0, "memory/x_peak_rss_gib": 1.5},
        ]
    )
    assert merged == {"throughput/x_tokens_per_s": 180.0, "timing/x_compute": 3.0, "memory/x_peak_rss_gib": 2.5}


def test_max_mean_and_single_rank() -> None:
    ranks = [{"gap_max": 1e-5, "gap_mean": 1.0, "rollout/truncated_frac": 0.5}, {"gap_max": 3e-5, "gap_mean": 3.0}]
    assert merge_rank_metrics(ranks) == {"gap_max": 3e-5, "gap_mean": 2.0, "rollout/truncated_frac": 0.5}
    assert merge_rank_metrics([{"a": 1.0}]) == {"a": 1.0}
