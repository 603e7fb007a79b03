"""The actor_ref packing plan (pure numpy): rows, offsets, ids, positions, masks and where log-probs go."""

import numpy as np
import pytest

from relay.engines.torch_packing import (
    block_causal_mask,
    first_fit_decreasing,
    fullest_rows_first,
    packed_rows,
    plan_packing,
    shared_prompt_rows,
)


def test_first_fit_decreasing_golden() -> None:
    row_of, offset_of, fill = first_fit_decreasing(np.array([5, 3, 2, 4]), 6)
    np.testing.assert_array_equal(row_of, [0, 2, 1, 1])
    np.testing.assert_array_equal(offset_of, [0, 0, 4, 0])
    np.testing.assert_array_equal(fill, [5, 6, 3])


def test_fullest_rows_come_first() -> None:
    row_of, offset_of, fill = fullest_rows_first(*first_fit_decreasing(np.array([5, 3, 2, 4, 0]), 6))
    np.testing.assert_array_equal(row_of, [1, 2, 0, 0, -1])
    np.testing.assert_array_equal(offset_of, [0, 0, 4, 0, 0])
    np.testing.assert_array_equal(fill, [6, 5, 3])


def test_first_fit_decreasing_skips_empty_items_and_keeps_ties_in_order() -> None:
    row_of, offset_of, fill = first_fit_decreasing(np.array([2, 0, 2, 2]), 4)
    np.testing.assert_array_equal(row_of, [0, -1, 0, 1])
    np.testing.assert_array_equal(offset_of, [0, 0, 2, 0])
    np.testing.assert_array_equal(fill, [4, 2])
    assert first_fit_decreasing(np.array([], np.int64), 4)[2].shape == (0,)
    with pytest.raises(ValueError, match="7 tokens does not fit a packed row of 6"):
        first_fit_decreasing(np.array([7, 1]), 6)


# The module docstring's example: P = 3, two sequences of 4 real tokens each.
MASK = np.array([[0, 1, 1, 1, 1, 0], [1, 1, 1, 1, 0, 0]])
IDS = np.array([[0, 11, 12, 13, 14, 0], [21, 22, 23, 24, 0, 0]])


def test_plan_of_the_docstring_example_one_sequence_per_row() -> None:
    plan = plan_packing(MASK, prompt_length=3)  # width P + R = 6: one sequence per row
    assert (plan.width, plan.rows, plan.real_tokens) == (6, 2, 8)
    np.testing.assert_array_equal(plan.fill, [4, 4])
    ids, positions, segments, _ = packed_rows(plan, IDS, slice(0, 2))
    np.testing.assert_array_equal(ids, [[11, 12, 13, 14], [21, 22, 23, 24]])  # cut to the widest fill
    np.testing.assert_array_equal(positions, [[0, 1, 2, 3], [0, 1, 2, 3]])
    np.testing.assert_array_equal(segments, [[0, 0, 0, 0], [1, 1, 1, 1]])
    # c (13) and d (14) of sequence 0, h (24) of sequence 1
    np.testing.assert_array_equal(np.stack([plan.pred_row, plan.pred_col]), [[0, 0, 1], [1, 2, 2]])
    np.testing.assert_array_equal(np.stack([plan.out_row, plan.out_col]), [[0, 0, 1], [0, 1, 0]])
    assert plan.padding_share(1) == plan.padding_share(8) == 0.0


def test_plan_of_the_docstring_example_two_sequences_in_one_row() -> None:
    plan = plan_packing(MASK, prompt_length=3, width=8)
    np.testing.assert_array_equal(plan.fill, [8])
    ids, positions, segments, _ = packed_rows(plan, IDS, slice(0, 1))
    np.testing.assert_array_equal(ids, [[11, 12, 13, 14, 21, 22, 23, 24]])
    np.testing.assert_array_equal(positions, [[0, 1, 2, 3, 0, 1, 2, 3]])
    np.testing.assert_array_equal(segments, [[0, 0, 0, 0, 1, 1, 1, 1]])
    np.testing.assert_array_equal(np.stack([plan.pred_row, plan.pred_col]), [[0, 0, 0], [1, 2, 6]])


def test_padding_slots_and_micro_batch_widths() -> None:
    # P = 2, R = 3: real lengths 5, 2, 3 (rows padded to 5); width 5 -> rows [5], [3 + 2]
    mask = np.array([[1, 1, 1, 1, 1], [0, 1, 1, 0, 0], [1, 1, 1, 0, 0]])
    ids = np.arange(15).reshape(3, 5) + 100
    plan = plan_packing(mask, prompt_length=2)
    np.testing.assert_array_equal(plan.fill, [5, 5])
    got, positions, segments, _ = packed_rows(plan, ids, slice(1, 2), pad_id=7)
    np.testing.assert_array_equal(got, [[110, 111, 112, 106, 107]])
    np.testing.assert_array_equal(positions, [[0, 1, 2, 0, 1]])
    np.testing.assert_array_equal(segments, [[2, 2, 2, 1, 1]])
    # a forward is as wide as the fullest of its rows: padding appears when fills differ
    mask2 = np.array([[1, 1, 1, 1, 0], [0, 1, 1, 0, 0], [1, 1, 1, 1, 1]])  # lengths 4, 2, 5
    plan2 = plan_packing(mask2, prompt_length=2)
    np.testing.assert_array_equal(plan2.fill, [5, 4, 2])  # 5 | 4 | 2 (4 + 2 > 5)
    assert plan2.computed_slots(3) == 3 * 5 and plan2.computed_slots(1) == 5 + 4 + 2
    assert plan2.padding_share(3) == pytest.approx(1 - 11 / 15) and plan2.padding_share(1) == 0.0
    got, _, segments, _ = packed_rows(plan2, ids, slice(1, 3), pad_id=7)
    np.testing.assert_array_equal(got, [[100, 101, 102, 103], [106, 107, 7, 7]])
    np.testing.assert_array_equal(segments, [[0, 0, 0, 0], [1, 1, -1, -1]])
    assert [(s.start, s.stop) for s in plan2.micro_batches(2)] == [(0, 2), (2, 3)]


def test_sequences_without_response_are_not_packed() -> None:
    mask = np.array([[1, 1, 0, 0], [0, 1, 1, 1]])  # P = 2: sequence 0 has no response token
    plan = plan_packing(mask, prompt_length=2)
    assert plan.rows == 1 and plan.real_tokens == 3 and set(plan.src_row) == {1}
    np.testing.assert_array_equal(np.stack([plan.out_row, plan.out_col]), [[1, 1], [0, 1]])
    empty = plan_packing(np.zeros((2, 4), np.int64), prompt_length=2)
    assert empty.rows == 0 and empty.padding_share(4) == 0.0 and empty.micro_batches(4) == []


def test_a_response_without_a_prompt_token_is_refused() -> None:
    with pytest.raises(ValueError, match="sequence 1 has response tokens but no prompt token"):
        plan_packing(np.array([[0, 1, 1, 0], [0, 0, 1, 1]]), prompt_length=2)


def test_block_causal_mask_golden() -> None:
    mask = block_causal_mask(np.array([[0, 0, 1, -1]]))
    assert mask.shape == (1, 1, 4, 4) and mask.dtype == bool
    np.testing.assert_array_equal(mask[0, 0].astype(int), [[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
    # two rows at once; a segment index reused in another row is another row's sequence, never mixed
    two = block_causal_mask(np.array([[3, 3, -1], [5, 5, 5]]))
    np.testing.assert_array_equal(two[0, 0].astype(int), [[1, 0, 0], [1, 1, 0], [0, 0, 1]])
    np.testing.assert_array_equal(two[1, 0].astype(int), np.tril(np.ones((3, 3), int)))


def test_shared_prompt_plan_golden() -> None:
    """P = 3, one prompt (a b c) sampled twice (d e | f) plus another prompt (g h | i): the first two share
    one copy of their prompt, branches 1 and 2; both first response tokens are predicted from c's slot."""
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0], [0, 1, 1, 1, 0]])
    ids = np.array([[11, 12, 13, 14, 15], [11, 12, 13, 16, 0], [0, 21, 22, 23, 0]])
    plan = plan_packing(mask, prompt_length=3, width=8, input_ids=ids)
    assert (plan.real_tokens, plan.sequence_tokens) == (9, 12) and plan.shared_prompt_share == 0.25
    np.testing.assert_array_equal(plan.fill, [6, 3])
    got, positions, segments, branches = packed_rows(plan, ids, slice(0, 2))
    np.testing.assert_array_equal(got, [[11, 12, 13, 14, 15, 16], [21, 22, 23, 0, 0, 0]])
    np.testing.assert_array_equal(positions, [[0, 1, 2, 3, 4, 3], [0, 1, 2, 0, 0, 0]])
    np.testing.assert_array_equal(segments, [[0, 0, 0, 0, 0, 0], [2, 2, 2, -1, -1, -1]])
    np.testing.assert_array_equal(branches, [[0, 0, 0, 1, 1, 2], [0, 0, 0, 0, 0, 0]])
    np.testing.assert_array_equal(np.stack([plan.pred_row, plan.pred_col]), [[0, 0, 0, 1], [2, 3, 2, 1]])
    np.testing.assert_array_equal(np.stack([plan.out_row, plan.out_col]), [[0, 0, 1, 2], [0, 1, 0, 0]])
    mask6 = block_causal_mask(segments[:1], branches[:1])[0, 0].astype(int)
    np.testing.assert_array_equal(mask6[5], [1, 1, 1, 0, 0, 1])  # f sees a b c and itself, not d e
    assert shared_prompt_rows(ids, mask, 3, micro_batch_size=8) == (3 + 2 * 2, 8 * 5 // 7)
    many = np.tile(ids[:1], (16, 1))  # a group of 16: 3 + 8 x 2 = 19 fits the cap of 4 x 5 = 20; 3 + 16 x 2 does not
    assert shared_prompt_rows(many, np.ones_like(many), 3, micro_batch_size=8) == (19, 8 * 5 // 19)
    assert shared_prompt_rows(many, np.ones_like(many), 3, micro_batch_size=16) == (20, 16 * 5 // 20)


def test_block_causal_mask_with_branches_golden() -> None:
    mask = block_causal_mask(np.array([[0, 0, 0, 0]]), np.array([[0, 1, 2, 2]]))[0, 0].astype(int)
    np.testing.assert_array_equal(mask, [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 1, 1]])
