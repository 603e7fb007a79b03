"""pass@k, mean@k and the val/* summary: golden values computed by hand."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest

from relay.data_proto import DataProto
from relay.evaluation import (
    difference_interval,
    grading_chunks,
    mean_at_k,
    pass_at_k,
    split_correctness,
    summarize_validation,
    validation_metrics,
    wilson_interval,
)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (4, 1, 2, 0.5),  # 1 - C(3,2)/C(4,2) = 1 - 3/6
        (5, 2, 3, 0.9),  # 1 - C(3,3)/C(5,3) = 1 - 1/10
        (10, 3, 1, 0.3),  # pass@1 = c/n
        (4, 0, 4, 0.0),  # nothing correct
        (4, 1, 4, 1.0),  # k = n: solved iff any sample is correct
        (6, 4, 3, 1.0),  # n - c = 2 < k: every draw of 3 holds a correct one
        (6, 2, 2, 1 - 6 / 15),  # 1 - C(4,2)/C(6,2)
    ],
)
def test_pass_at_k_golden(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_matches_the_binomials_and_stays_finite_for_large_n() -> None:
    for n, c, k in [(20, 5, 7), (50, 1, 10), (13, 12, 2)]:
        assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k), abs=1e-12)
    # C(2000, 1000) overflows a float; the product form does not: 1 - (1000/2000)(999/1999) for c=2
    assert pass_at_k(2000, 1, 1000) == pytest.approx(0.5)
    assert pass_at_k(2000, 2, 1000) == pytest.approx(1 - 0.5 * 999 / 1999)


def test_pass_at_k_refuses_impossible_counts() -> None:
    with pytest.raises(ValueError, match="0 <= c <= n"):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(3, 1, 4)


def test_mean_at_k_golden() -> None:
    assert mean_at_k(np.array([[1, 0, 0, 0], [1, 1, 0, 0]])) == pytest.approx(0.375)


def test_summarize_validation_golden() -> None:
    greedy = np.array([True, False, False])
    samples = np.array([[True, False], [False, True], [False, False]])
    assert summarize_validation(greedy, samples) == pytest.approx(
        {"val/accuracy_greedy": 1 / 3, "val/pass@2": 2 / 3, "val/mean@2": 1 / 3, "val/problems": 3.0}
    )
    four = summarize_validation(np.array([1, 1]), np.array([[1, 0, 0, 0], [0, 0, 0, 0]]))
    assert four == {"val/accuracy_greedy": 1.0, "val/pass@4": 0.5, "val/mean@4": 0.125, "val/problems": 2.0}


def test_summarize_validation_checks_shapes() -> None:
    with pytest.raises(ValueError, match="correct_greedy has 2 problems but correct_samples has 3"):
        summarize_validation(np.ones(2, bool), np.ones((3, 2), bool))
    with pytest.raises(ValueError, match="correct_samples must be 2-D"):
        summarize_validation(np.ones(2, bool), np.ones(2, bool))
    with pytest.raises(ValueError, match="booleans or 0/1"):
        summarize_validation(np.array([0.5]), np.ones((1, 2)))


def test_split_correctness_puts_the_greedy_column_first() -> None:
    greedy, samples = split_correctness(np.array([1, 0, 1, 0, 0, 0], np.float32), k=2)
    assert greedy.tolist() == [True, False] and samples.tolist() == [[False, True], [False, False]]
    with pytest.raises(ValueError, match=r"\[P \* 3\]"):
        split_correctness(np.ones(4), k=2)


def _rows(problems: int, k: int) -> DataProto:
    n = problems * (1 + k)
    return DataProto.from_dict(
        batch={
            "sample_index": np.tile(np.arange(1 + k, dtype=np.int32), problems),
            "response_length": np.arange(n, dtype=np.int32),
            "finished": np.arange(n) % 2 == 0,
        },
        non_tensor={
            "uid": [f"test-{i // (1 + k)}" for i in range(n)],
            "question": ["q"] * n,
            "ground_truth": ["1"] * n,
            "response_text": [f"#### {i}" for i in range(n)],
        },
        meta_info={"metrics": {"validation/new_tokens": 12.0, "throughput/validation_tokens_per_s": 3.0}},
    )


def test_validation_metrics_from_graded_chunks() -> None:
    rows = _rows(problems=3, k=2)  # 9 rows: greedy at 0, 3, 6
    chunks = grading_chunks(rows, size=4)
    assert [len(c) for c in chunks] == [4, 4, 1]
    # the grading inputs and the token fields a user function reads (these rows have only the lengths)
    assert set(chunks[0].keys()) == {"response_text", "ground_truth", "question", "uid", "response_length"}
    assert chunks[0].meta_info == {"lenient": True}  # validation asks the reward role for the lenient reading
    acc = np.array([1, 0, 0, 0, 1, 1, 0, 0, 0], np.float32)  # p0: greedy right; p1: both samples; p2: none
    graded = [
        DataProto.from_dict(batch={"acc": acc[s]}, meta_info={"metrics": {"reward/errors": e, "reward/timeouts": t}})
        for s, e, t in [(slice(0, 4), 1.0, 0.0), (slice(4, 8), 0.0, 2.0), (slice(8, 9), 0.0, 0.0)]
    ]
    m = validation_metrics(rows, graded, k=2)
    assert m["val/accuracy_greedy"] == pytest.approx(1 / 3)
    assert m["val/pass@2"] == pytest.approx(1 / 3) and m["val/mean@2"] == pytest.approx(2 / 6)
    assert m["val/problems"] == 3.0
    assert m["val/greedy_length_mean"] == pytest.approx((0 + 3 + 6) / 3)
    assert m["val/truncated_frac"] == pytest.approx(4 / 9)
    assert (m["val/grading_errors"], m["val/grading_timeouts"]) == (1.0, 2.0)
    assert (m["val/new_tokens"], m["val/tokens_per_s"]) == (12.0, 3.0)
    assert m["val/format_rate_greedy"] == 1.0 and m["val/format_rate@2"] == 1.0  # every row ends "#### i"
    assert m["val/truncated_frac_greedy"] == pytest.approx(1 / 3)  # rows 0, 3, 6: only 3 is odd (cut)
    assert (m["val/accuracy_greedy_ci_low"], m["val/accuracy_greedy_ci_high"]) == pytest.approx(wilson_interval(1, 3))
    with pytest.raises(ValueError, match="9 validation rows but 4 grades"):
        validation_metrics(rows, graded[:1], k=2)


@pytest.mark.parametrize(
    ("successes", "trials", "low", "high"),
    [
        (0, 200, 0.0, 0.018845),  # never empty at 0: the upper end is z²/(n + z²)
        (10, 200, 0.027383, 0.089578),  # 5% on 200 problems
        (50, 100, 0.403832, 0.596168),  # symmetric around 1/2
        (200, 200, 0.981155, 1.0),
    ],
)
def test_wilson_interval_golden(successes: int, trials: int, low: float, high: float) -> None:
    assert wilson_interval(successes, trials) == pytest.approx((low, high), abs=1e-6)


def test_wilson_interval_holds_the_proportion_exactly_at_the_ends() -> None:
    # 200/200 used to end at 0.9999999999999999 and a plot's error bar (1.0 - high) went negative
    assert wilson_interval(200, 200)[1] == 1.0 and wilson_interval(0, 200)[0] == 0.0
    for successes in range(0, 201, 7):
        low, high = wilson_interval(successes, 200)
        assert low <= successes / 200 <= high


def test_wilson_interval_refuses_impossible_counts() -> None:
    with pytest.raises(ValueError, match="3/2"):
        wilson_interval(3, 2)
    with pytest.raises(ValueError, match="trials >= 1"):
        wilson_interval(0, 0)


def test_greedy_only_validation_has_no_sample_metrics() -> None:
    rows = _rows(problems=2, k=0)
    rows.non_tensor["response_text"] = np.array(["#### 1", "I think it is 1"], dtype=object)
    graded = [DataProto.from_dict(batch={"acc": np.array([1.0, 0.0], np.float32)})]
    m = validation_metrics(rows, graded, k=0)
    assert m["val/accuracy_greedy"] == 0.5 and m["val/format_rate_greedy"] == 0.5
    assert not [key for key in m if "@" in key]
    assert summarize_validation(np.array([True]), np.zeros((1, 0), bool)) == {
        "val/accuracy_greedy": 1.0,
        "val/problems": 1.0,
    }


def test_difference_interval_golden() -> None:
    assert difference_interval(12, 200, 6, 200) == pytest.approx((0.03, -0.012324, 0.074945), abs=1e-6)
    assert difference_interval(60, 200, 20, 200) == pytest.approx((0.2, 0.122852, 0.275097), abs=1e-6)
    d, low, high = difference_interval(0, 200, 0, 200)  # symmetric, and not empty at 0
    assert d == 0.0 and low == pytest.approx(-high) and high == pytest.approx(0.018845, abs=1e-6)
