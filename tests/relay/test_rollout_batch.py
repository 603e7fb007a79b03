"""Golden layout of the padded rollout arrays."""

import numpy as np
import pytest

from relay.data_proto import DataProto
from relay.engines.base import Generation
from relay.rollout_batch import (
    assemble_rollout,
    merge_rollout_parts,
    pop_metrics,
    repad_rollout,
    round_up,
    split_rows,
    stack_rows,
)


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


def test_repad_matches_assembling_at_the_wider_widths() -> None:
    prompts, gens = [[5, 6]], [[Generation([7, 2], [-0.5, -0.25], True)]]
    narrow = assemble_rollout(prompts, gens, pad_token_id=0, bucket=4)
    wide = assemble_rollout(prompts, gens, pad_token_id=0, bucket=8, min_prompt_width=8)
    wide_r = repad_rollout(narrow, width_p=8, width_r=8, pad_token_id=0)
    assert wide_r.keys() == wide.keys()
    for key, value in wide.items():
        np.testing.assert_array_equal(wide_r[key], value, err_msg=key)
    np.testing.assert_array_equal(wide_r["position_ids"][0, 6:10], [0, 1, 2, 3])  # real tokens keep positions
    with pytest.raises(ValueError, match="cannot shrink"):
        repad_rollout(wide_r, 4, 4, 0)


def test_merged_replica_rollouts_stack_in_order() -> None:
    a = assemble_rollout([[5]], [[Generation([7], [-1.0], True)]], pad_token_id=0, bucket=2)
    b = assemble_rollout([[1, 2, 3]], [[Generation([4, 4, 4], [-2.0] * 3, False)]], pad_token_id=0, bucket=2)
    parts = [
        DataProto.from_dict(
            batch=x,
            non_tensor={"uid": np.array([u], dtype=object)},
            meta_info={
                "prompt_length": x["prompts"].shape[1],
                "pad_token_id": 0,
                "metrics": {"throughput/rollout_tokens_per_s": t, "timing/rollout_compute": s},
            },
        )
        for x, u, t, s in ((a, "a", 10.0, 1.0), (b, "b", 30.0, 2.0))
    ]
    out = merge_rollout_parts(parts)
    assert out.meta_info["prompt_length"] == 4 and out.batch["responses"].shape == (2, 4)
    assert list(out.non_tensor["uid"]) == ["a", "b"]
    np.testing.assert_array_equal(out.batch["input_ids"], [[0, 0, 0, 5, 7, 0, 0, 0], [0, 1, 2, 3, 4, 4, 4, 0]])
    assert out.meta_info["metrics"] == {"throughput/rollout_tokens_per_s": 40.0, "timing/rollout_compute": 2.0}


@pytest.mark.parametrize(
    ("rows", "parts", "sizes"), [(10, 3, [4, 3, 3]), (8, 2, [4, 4]), (2, 3, [1, 1]), (0, 2, []), (5, 1, [5])]
)
def test_split_rows(rows, parts, sizes) -> None:
    slices = split_rows(rows, parts)
    assert [s.stop - s.start for s in slices] == sizes
    assert all(x.stop == y.start for x, y in zip(slices, slices[1:], strict=False))


def test_rank_shares_stack_in_order_with_the_stalest_version() -> None:
    parts = [
        DataProto.from_dict(batch={"x": np.array([1, 2])}, meta_info={"weights_version": 3, "metrics": {"a": 1.0}}),
        DataProto.from_dict(batch={"x": np.array([3])}, meta_info={"weights_version": 2, "metrics": {"a": 3.0}}),
    ]
    out = stack_rows(parts)
    np.testing.assert_array_equal(out.batch["x"], [1, 2, 3])
    assert out.meta_info["weights_version"] == 2
    assert out.meta_info["metrics"] == {"a": 2.0}  # neither timing, memory nor throughput: the ranks' mean
    assert pop_metrics(out) == {"a": 2.0} and "metrics" not in out.meta_info
