"""Tests for the toy token-share reward."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.harness.toy_reward import token_share


def test_counts_only_real_tokens() -> None:
    ids = np.array([5, 6, 7, 5, 0, 0])
    mask = np.array([1, 1, 1, 1, 0, 0])
    assert token_share(ids, mask, target_ids={5}) == 0.5
    assert token_share(ids, mask, target_ids=range(5, 7)) == 0.75
    assert token_share(ids, mask.astype(bool), target_ids={0}) == 0.0  # padding never counts


def test_empty_response_scores_zero() -> None:
    assert token_share(np.array([3, 3]), np.array([0, 0]), target_ids={3}) == 0.0
    assert token_share(np.array([], dtype=np.int64), np.array([]), target_ids={3}) == 0.0


def test_returns_python_float_in_unit_interval() -> None:
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 100, size=64)
    mask = rng.integers(0, 2, size=64)
    share = token_share(ids, mask, target_ids=range(50))
    assert isinstance(share, float) and 0.0 <= share <= 1.0
    assert share == pytest.approx(np.mean(ids[mask == 1] < 50))


def test_shape_mismatch() -> None:
    with pytest.raises(ValueError, match="equal length"):
        token_share(np.zeros(3), np.zeros(4), target_ids={0})
    with pytest.raises(ValueError, match="1-D"):
        token_share(np.zeros((2, 2)), np.zeros((2, 2)), target_ids={0})
