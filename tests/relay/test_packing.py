"""The row layout of relay.packing: packing arithmetic with golden values."""

import numpy as np
import pytest

from relay.learner.synthetic import synthetic_batch
from relay.packing import first_fit_decreasing, layout_rows, round_up, slots_to_sequences


def _two_sequences() -> dict[str, np.ndarray]:
    """The module docstring's example: (prompt, response) real lengths (3, 2) and (2, 1), P = 3, R = 2."""
    ids = np.array([[11, 12, 13, 21, 22], [0, 31, 32, 41, 0]], np.int32)
    attn = np.array([[1, 1, 1, 1, 1], [0, 1, 1, 1, 0]], np.int32)
    return {
        "input_ids": ids,
        "attention_mask": attn,
        "response_mask": attn[:, 3:].astype(np.float32),
        "advantages": np.array([[0.5, 0.5], [-1.0, 9.0]], np.float32),
    }


def test_golden_packed_layout() -> None:
    rows, layout = layout_rows(_two_sequences(), 3, packing=True, width=8)
    np.testing.assert_array_equal(rows["input_ids"], [[11, 12, 13, 21, 22, 31, 32, 41]])
    np.testing.assert_array_equal(rows["segment_ids"], [[1, 1, 1, 1, 1, 2, 2, 2]])
    np.testing.assert_array_equal(rows["position_ids"], [[0, 1, 2, 3, 4, 0, 1, 2]])
    np.testing.assert_array_equal(rows["slot_index"], [[2, 3, 6]])
    np.testing.assert_array_equal(rows["targets"], [[21, 22, 41]])
    np.testing.assert_array_equal(rows["slot_seq_tokens"], [[2, 2, 1]])
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
