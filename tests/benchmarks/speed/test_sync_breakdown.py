"""benchmarks.speed.sync_breakdown's arithmetic and report; the measurement itself (a vLLM engine on SmolLM2) is the
benchmark, not a test."""

from __future__ import annotations

import numpy as np

from benchmarks.speed.sync_breakdown import hf_weights, main, profiled_seconds, report, summarize


def test_summarize_takes_medians_and_ratios_to_the_plain_copy() -> None:
    # plain copy median 0.2, publish median 0.5 -> 2.5x; 10**9 bytes in 0.2 s = 5 GB/s.
    s = summarize({"plain_copy": [0.1, 0.2, 0.3], "publish": [0.5, 0.4, 0.9]}, 10**9)
    assert s["median_seconds"] == {"plain_copy": 0.2, "publish": 0.5}
    assert s["over_plain_copy"] == {"plain_copy": 1.0, "publish": 2.5}
    assert s["plain_copy_gb_per_s"] == 5.0


def test_report_totals_publish_and_file_load() -> None:
    samples = {
        "plain_copy": [0.1],
        "publish": [0.2],
        "load_from_file": [0.3],
        "load_from_dict": [0.25],
        "repack": [0.05],
    }
    result = summarize(samples, 5 * 10**8)
    result.update(model="m", repeats=1, machine="x86_64, 2 cores, no GPU", date="2026-11-24")
    text = report(result)
    assert "| rollout: vLLM load from the memory file | 0.300 | 3.0× |" in text
    assert "0.500 s = 5.0× the plain copy (5.0 GB/s)" in text  # publish 0.2 + load 0.3 over 0.1


def test_hf_weights_are_the_learners_export_of_the_checkpoint(tiny_model_dir) -> None:
    from safetensors.numpy import load_file

    weights = hf_weights(tiny_model_dir)
    stored = {k: v for f in tiny_model_dir.glob("*.safetensors") for k, v in load_file(str(f)).items()}
    assert weights.keys() <= stored.keys() and weights
    assert all(np.array_equal(weights[k], stored[k]) for k in weights)


def test_profiled_seconds_counts_only_the_named_function() -> None:
    big = np.ones(2_000_000)
    assert profiled_seconds(lambda: np.sort(big), "sort") > 0.0
    assert profiled_seconds(lambda: np.sort(big), "no_such_function_name") == 0.0


def test_repeats_below_one_exit_2(capsys) -> None:
    assert main(["--repeats", "0", "--no-write"]) == 2
    assert "--repeats 0" in capsys.readouterr().err
