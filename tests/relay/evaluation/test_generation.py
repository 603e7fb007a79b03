"""Validation rows carry training's token layout (golden values)."""

from __future__ import annotations

import numpy as np

from relay.engines.base import Generation
from relay.evaluation.generation import response_tokens


def test_response_tokens_pad_right_and_mask_tool_results() -> None:
    single = Generation(token_ids=[5, 6, 7], log_probs=[0.0] * 3, finished=True)
    multi = Generation(token_ids=[8, 9, 10, 11], log_probs=[0.0] * 4, finished=True, loss_mask=[1, 0, 0, 1])
    short = Generation(token_ids=[12], log_probs=[0.0], finished=False)
    out = response_tokens([single, multi, short], pad_token_id=2)
    np.testing.assert_array_equal(out["responses"], [[5, 6, 7, 2], [8, 9, 10, 11], [12, 2, 2, 2]])
    np.testing.assert_array_equal(out["response_mask"], [[1, 1, 1, 0], [1, 0, 0, 1], [1, 0, 0, 0]])
    assert out["responses"].dtype == np.int32 and out["response_mask"].dtype == np.float32


def test_response_tokens_without_a_pad_id_pad_with_zero() -> None:
    out = response_tokens([Generation(token_ids=[3], log_probs=[0.0], finished=True)], pad_token_id=None)
    assert out["responses"].tolist() == [[3]] and response_tokens([], 0)["responses"].shape == (0, 0)
