"""The row layout of relay.packing: packing arithmetic with golden values."""

import numpy as np
import pytest

from benchmarks.harness.synthetic import synthetic_batch
from relay.packing import first_fit_decreasing, layout_rows, round_up, slots_to_sequences


def _prompt_response_batch(
    ids: list[list[int]], attn: list[list[int]], advantages: list[list[float]]
) -> dict[str, np.ndarray]:
    """Rows of prompt length P = 3 then response length R = 2, with their attention mask and advantages."""
    mask = np.array(attn, np.int32)
    return {
        "input_ids": np.array(ids, np.int32),
        "attention_mask": mask,
        "response_mask": mask[:, 3:].astype(np.float32),
        "advantages": np.array(advantages, np.float32),
    }


def _two_sequences() -> dict[str, np.ndarray]:
    """The module docstring's example: (prompt, response) real lengths (3, 2) and (2, 1), P = 3, R = 2."""
    ids = [[11, 12, 13, 21, 22], [0, 31, 32, 41, 0]]
    return _prompt_response_batch(ids, [[1, 1, 1, 1, 1], [0, 1, 1, 1, 0]], [[0.5, 0.5], [-1.0, 9.0]])


def test_golden_packed_layout() -> None:
    rows, layout = layout_rows(_two_sequences(), 3, packing=True, width=8)
    np.testing.assert_array_equal(rows["input_ids"], [[11, 12, 13, 21, 22, 31, 32, 41]])
    np.testing.assert_array_equal(rows["segment_ids"], [[1, 1, 1, 1, 1, 2, 2, 2]])
    np.testing.assert_array_equal(rows["position_ids"], [[0, 1, 2, 3, 4, 0, 1, 2]])
    np.testing.assert_array_equal(rows["slot_index"], [[2, 3, 6]])
    np.testing.assert_array_equal(rows["targets"], [[21, 22, 41]])
    np.testing.assert_array_equal(rows["slot_seq_tokens"], [[2, 2, 1]])
    np.testing.assert_array_equal(rows["slot_sequence"], [[1, 1, 2]])
    np.testing.assert_array_equal(rows["advantages"], [[0.5, 0.5, -1.0]])  # the 9.0 on padding is dropped
    np.testing.assert_array_equal(rows["row_sequences"], [2])
    assert layout.padding_share == 0.0 and layout.real_tokens == 8


def test_golden_padded_layout_keeps_positions() -> None:
    rows, layout = layout_rows(_two_sequences(), 3, packing=False)
    np.testing.assert_array_equal(rows["input_ids"], [[11, 12, 13, 21, 22], [0, 31, 32, 41, 0]])
    np.testing.assert_array_equal(rows["segment_ids"], [[1, 1, 1, 1, 1], [0, 1, 1, 1, 0]])
    np.testing.assert_array_equal(rows["slot_index"], [[2, 3], [2, 0]])  # hidden at P - 1 + j, as before
    np.testing.assert_array_equal(rows["slot_mask"], [[1, 1], [1, 0]])
    assert layout.padding_share == pytest.approx(2 / 10)


def test_first_fit_decreasing_and_round_up() -> None:
    # first_fit_decreasing's golden values are in tests/relay/engines/test_torch_packing.py (its first user)
    with pytest.raises(ValueError, match="does not fit a packed row of 4"):
        first_fit_decreasing(np.array([5]), 4)
    assert (round_up(65, 64), round_up(64, 64), round_up(0, 16)) == (128, 64, 16)


def test_slots_round_trip_to_the_padded_layout() -> None:
    batch = synthetic_batch(12, 8, 8, vocab=100, seed=3)
    rows, layout = layout_rows(batch, 8, packing=True, width=32, slot_bucket=4, row_multiple=4)
    assert rows["input_ids"].shape[0] % 4 == 0 and rows["slot_index"].shape[1] % 4 == 0
    back = slots_to_sequences(rows["advantages"], layout)
    np.testing.assert_array_equal(back, batch["advantages"] * batch["response_mask"])
    assert layout.computed_tokens == rows["input_ids"].size  # the appended empty rows count as padding
    _, tight = layout_rows(batch, 8, packing=True, width=45)  # real lengths 13 and 16: 16 + 16 + 13 fill a row
    assert tight.padding_share < 1.0 - batch["attention_mask"].mean()  # fewer pads than the padded layout


def test_rows_must_be_prompt_then_response() -> None:
    batch = _two_sequences()
    batch["attention_mask"] = batch["attention_mask"].copy()
    batch["attention_mask"][0, 4] = 0  # a response token outside the attention mask
    with pytest.raises(ValueError, match="real prompt"):
        layout_rows(batch, 3, packing=True)


def _one_prompt_two_samples() -> dict[str, np.ndarray]:
    """The module docstring's shared-prompt example: prompt p p p, responses r r and s (P = 3, R = 2)."""
    ids = [[11, 12, 13, 21, 22], [11, 12, 13, 31, 0]]
    return _prompt_response_batch(ids, [[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]], [[0.5, 0.5], [-1.0, 0.0]])


def test_golden_shared_prompt_layout() -> None:
    rows, layout = layout_rows(_one_prompt_two_samples(), 3, packing=True, width=8, share_prompts=True)
    np.testing.assert_array_equal(rows["input_ids"], [[11, 12, 13, 21, 22, 31, 0, 0]])
    np.testing.assert_array_equal(rows["segment_ids"], [[1, 1, 1, 1, 1, 1, 0, 0]])
    np.testing.assert_array_equal(rows["position_ids"], [[0, 1, 2, 3, 4, 3, 0, 0]])
    np.testing.assert_array_equal(rows["branch_ids"], [[0, 0, 0, 1, 1, 2, 0, 0]])
    np.testing.assert_array_equal(rows["slot_index"], [[2, 3, 2]])
    np.testing.assert_array_equal(rows["targets"], [[21, 22, 31]])
    np.testing.assert_array_equal(rows["advantages"], [[0.5, 0.5, -1.0]])
    np.testing.assert_array_equal(rows["row_sequences"], [2])
    assert (layout.real_tokens, layout.sequence_tokens) == (6, 9)
    assert layout.shared_prompt_share == pytest.approx(1 / 3)
    np.testing.assert_array_equal(layout.first_slot, [0, 2])


def test_shared_prompt_family_is_cut_to_the_row_width() -> None:
    """prompt_pieces' example: prompt 4, responses 3, 3, 2 in rows of 10 -> [4+3+3] and [4+2]."""
    ids = np.array([[1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 4, 8, 9, 10], [1, 2, 3, 4, 11, 12, 0]], np.int32)
    attn = (ids > 0).astype(np.int32)
    batch = {"input_ids": ids, "attention_mask": attn, "response_mask": attn[:, 4:].astype(np.float32)}
    rows, layout = layout_rows(batch, 4, packing=True, width=10, share_prompts=True)
    np.testing.assert_array_equal(rows["segment_ids"], [[1] * 10, [1] * 6 + [0] * 4])
    np.testing.assert_array_equal(rows["branch_ids"], [[0, 0, 0, 0, 1, 1, 1, 2, 2, 2], [0] * 10])
    np.testing.assert_array_equal(layout.row, [0, 0, 1])
    assert layout.real_tokens == 16 and layout.sequence_tokens == 20


def test_shared_prompts_round_trip_and_leave_distinct_prompts_alone() -> None:
    batch = synthetic_batch(12, 8, 8, vocab=100, seed=3, group=4)
    rows, layout = layout_rows(batch, 8, packing=True, width=64, share_prompts=True)
    np.testing.assert_array_equal(slots_to_sequences(rows["advantages"], layout), batch["advantages"])
    assert layout.real_tokens < layout.sequence_tokens and rows["branch_ids"].max() == 4
    distinct = synthetic_batch(12, 8, 8, vocab=100, seed=3)  # no two prompts alike: the unshared layout
    shared, _ = layout_rows(distinct, 8, packing=True, width=64, share_prompts=True)
    plain, _ = layout_rows(distinct, 8, packing=True, width=64)
    for key in plain:
        np.testing.assert_array_equal(shared[key], plain[key])
