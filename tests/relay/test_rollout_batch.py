"""Golden layout of the padded rollout arrays."""

import numpy as np

from relay.engines.base import Generation
from relay.rollout_batch import assemble_rollout, round_up


def test_docstring_example_layout() -> None:
    out = assemble_rollout([[5, 6]], [[Generation([7, 2], [-0.5, -0.25], True)]], pad_token_id=0, bucket=4)
    np.testing.assert_array_equal(out["input_ids"], [[0, 0, 5, 6, 7, 2, 0, 0]])
    np.testing.assert_array_equal(out["attention_mask"], [[0, 0, 1, 1, 1, 1, 0, 0]])
    np.testing.assert_array_equal(out["position_ids"], [[0, 0, 0, 1, 2, 3, 3, 3]])
    np.testing.assert_array_equal(out["response_mask"], [[1, 1, 0, 0]])
    np.testing.assert_array_equal(out["rollout_log_probs"], [[-0.5, -0.25, 0, 0]])
    np.testing.assert_array_equal(out["response_length"], [2])


def test_samples_are_prompt_major_and_widths_bucketed() -> None:
    gens = [
        [Generation([1], [-1.0], True), Generation([2, 3, 4, 5, 6], [-1.0] * 5, False)],
        [Generation([8, 9], [-2.0, -2.0], True), Generation([3], [-3.0], True)],
    ]
    out = assemble_rollout([[10, 11, 12], [13]], gens, pad_token_id=0, bucket=4)
    assert out["prompts"].shape == (4, 4) and out["responses"].shape == (4, 8)
    np.testing.assert_array_equal(out["prompts"][:, -1], [12, 12, 13, 13])
    np.testing.assert_array_equal(out["response_length"], [1, 5, 2, 1])
    assert out["input_ids"].dtype == np.int32 and out["response_mask"].dtype == np.float32


def test_round_up() -> None:
    assert [round_up(v, 32) for v in (0, 1, 32, 33)] == [32, 32, 32, 64]


def test_min_prompt_width_pads_prompts_further() -> None:
    out = assemble_rollout([[5, 6]], [[Generation([7], [-1.0], True)]], pad_token_id=0, bucket=4, min_prompt_width=9)
    assert out["prompts"].shape == (1, 12)  # at least 9, rounded up to the bucket
    assert out["position_ids"][0, 10:13].tolist() == [0, 1, 2]
