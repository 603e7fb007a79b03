"""Tests for relay.data_proto.DataProto: every method and every error message."""

import pickle

import numpy as np
import pytest

from relay.data_proto import DataProto


def _make(n: int = 4) -> DataProto:
    """Row i holds: ids [i, 10 + i], scores 0.5 * i, uid 'u{i}', meta temperature 1.0."""
    return DataProto.from_dict(
        batch={
            "ids": np.stack([np.arange(n), 10 + np.arange(n)], axis=1).astype(np.int32),
            "scores": 0.5 * np.arange(n, dtype=np.float32),
        },
        non_tensor={"uid": [f"u{i}" for i in range(n)]},
        meta_info={"temperature": 1.0},
    )


def _uids(data: DataProto) -> list[str]:
    return data.non_tensor["uid"].tolist()


# --- construction and validation -------------------------------------------------------------------


def test_from_dict_and_defaults() -> None:
    data = _make(3)
    assert len(data) == 3
    assert data.keys() == ["ids", "scores", "uid"]
    assert data.meta_info == {"temperature": 1.0}
    empty = DataProto.from_dict()
    assert len(empty) == 0 and empty.keys() == [] and empty.meta_info == {}


def test_non_tensor_list_becomes_1d_object_array() -> None:
    # a list of equal-length lists must stay one element per sample, not become a 2-D array
    data = DataProto.from_dict(non_tensor={"answers": [[1, 2], [3, 4]], "q": np.array(["a", "b"])})
    assert data.non_tensor["answers"].dtype == object and data.non_tensor["answers"].shape == (2,)
    assert data.non_tensor["answers"][1] == [3, 4]
    assert data.non_tensor["q"].dtype == object


def test_length_mismatch_names_the_key() -> None:
    with pytest.raises(ValueError, match=r"'responses' has length 3, expected 2 \(the length of 'prompts'\)"):
        DataProto.from_dict(batch={"prompts": np.zeros((2, 4)), "responses": np.zeros((3, 5))})
    with pytest.raises(ValueError, match=r"'uid' has length 1, expected 2"):
        DataProto.from_dict(batch={"prompts": np.zeros((2, 4))}, non_tensor={"uid": ["a"]})


def test_scalar_field_is_rejected() -> None:
    with pytest.raises(ValueError, match="'scores' is a scalar"):
        DataProto.from_dict(batch={"scores": np.float32(1.0)})


# --- indexing -------------------------------------------------------------------------------------


def test_getitem_int_slice_array_and_mask() -> None:
    data = _make(4)
    row = data[-1]
    assert len(row) == 1 and row.batch["ids"].tolist() == [[3, 13]] and _uids(row) == ["u3"]
    assert _uids(data[1:3]) == ["u1", "u2"]
    picked = data[np.array([2, 0])]
    assert picked.batch["scores"].tolist() == [1.0, 0.0] and _uids(picked) == ["u2", "u0"]
    assert _uids(data[np.array([True, False, False, True])]) == ["u0", "u3"]
    assert data[1:3].meta_info == {"temperature": 1.0}


def test_getitem_does_not_share_meta_dict() -> None:
    data = _make(2)
    data[0:1].meta_info["temperature"] = 0.0
    assert data.meta_info["temperature"] == 1.0


# --- select / pop ---------------------------------------------------------------------------------


def test_select_keeps_named_fields_without_mutating() -> None:
    data = _make(3)
    sub = data.select(batch_keys=["scores"], non_tensor_keys=[], meta_keys=["temperature"])
    assert sub.keys() == ["scores"] and sub.meta_info == {"temperature": 1.0}
    assert data.keys() == ["ids", "scores", "uid"]
    assert data.select().keys() == data.keys()  # None keeps everything


def test_select_accepts_generators() -> None:
    assert _make(2).select(batch_keys=(k for k in ["ids"])).keys() == ["ids", "uid"]


def test_select_missing_key_names_it() -> None:
    with pytest.raises(KeyError, match=r"no batch key\(s\) \['logits'\]; available: \['ids', 'scores'\]"):
        _make(2).select(batch_keys=["logits"])
    with pytest.raises(KeyError, match=r"no meta_info key\(s\) \['eos'\]"):
        _make(2).select(meta_keys=["eos"])


def test_pop_removes_from_self() -> None:
    data = _make(3)
    popped = data.pop(batch_keys=["scores"], non_tensor_keys=["uid"], meta_keys=["temperature"])
    assert popped.keys() == ["scores", "uid"] and popped.meta_info == {"temperature": 1.0}
    assert popped.batch["scores"].tolist() == [0.0, 0.5, 1.0]
    assert data.keys() == ["ids"] and data.meta_info == {}
    assert data.pop().keys() == [] and data.keys() == ["ids"]  # None pops nothing


def test_pop_missing_key_names_it_and_removes_nothing() -> None:
    data = _make(2)
    with pytest.raises(KeyError, match=r"no non_tensor key\(s\) \['question'\]"):
        data.pop(batch_keys=["scores"], non_tensor_keys=["question"])
    assert data.keys() == ["ids", "scores", "uid"]


# --- union ----------------------------------------------------------------------------------------


def test_union_merges_fields() -> None:
    data = _make(3)
    extra = DataProto.from_dict(
        batch={"scores": data.batch["scores"].copy(), "adv": np.ones(3, dtype=np.float32)},
        meta_info={"pad_token_id": 0},
    )
    merged = data.union(extra)
    assert merged.keys() == ["ids", "scores", "adv", "uid"]
    assert merged.meta_info == {"temperature": 1.0, "pad_token_id": 0}
    assert "adv" not in data.batch  # input untouched


def test_union_with_nan_array_itself() -> None:
    data = DataProto.from_dict(batch={"x": np.array([np.nan, 1.0])})
    assert data.union(data.select()).keys() == ["x"]


def test_union_conflict_names_the_key() -> None:
    data = _make(2)
    with pytest.raises(ValueError, match="batch key 'scores' differs"):
        data.union(DataProto.from_dict(batch={"scores": np.array([9.0, 9.0])}))
    with pytest.raises(ValueError, match="non_tensor key 'uid' differs"):
        data.union(DataProto.from_dict(non_tensor={"uid": ["x", "y"]}))
    with pytest.raises(ValueError, match="meta_info key 'temperature' differs"):
        data.union(DataProto.from_dict(meta_info={"temperature": 0.6}))


def test_union_length_mismatch() -> None:
    with pytest.raises(ValueError, match=r"lengths differ \(2 vs 3\)"):
        _make(2).union(DataProto.from_dict(batch={"adv": np.zeros(3)}))


# --- chunk / split / concat -----------------------------------------------------------------------


def test_chunk_equal_parts() -> None:
    parts = _make(6).chunk(3)
    assert [_uids(p) for p in parts] == [["u0", "u1"], ["u2", "u3"], ["u4", "u5"]]
    assert all(p.meta_info == {"temperature": 1.0} for p in parts)


def test_chunk_not_divisible_suggests_padding() -> None:
    with pytest.raises(ValueError, match=r"length 5 is not divisible by 2; call pad_to_divisor\(2\) first"):
        _make(5).chunk(2)
    with pytest.raises(ValueError, match="k must be positive, got 0"):
        _make(4).chunk(0)


def test_split_last_part_shorter() -> None:
    parts = _make(5).split(2)
    assert [_uids(p) for p in parts] == [["u0", "u1"], ["u2", "u3"], ["u4"]]
    with pytest.raises(ValueError, match="size must be positive, got 0"):
        _make(5).split(0)


def test_concat_inverts_split() -> None:
    data = _make(5)
    data.meta_info["step"] = 7
    parts = data.split(2)
    parts[1].meta_info["step"] = 8  # concat takes meta_info from the first part
    joined = DataProto.concat(parts)
    assert _uids(joined) == _uids(data)
    np.testing.assert_array_equal(joined.batch["ids"], data.batch["ids"])
    assert joined.non_tensor["uid"].dtype == object and joined.meta_info["step"] == 7


def test_concat_errors() -> None:
    with pytest.raises(ValueError, match="empty list"):
        DataProto.concat([])
    other = _make(2).select(batch_keys=["ids"])
    with pytest.raises(ValueError, match=r"part 1 and part 0 differ in fields \['scores'\]"):
        DataProto.concat([_make(2), other])


# --- repeat / pad / unpad -------------------------------------------------------------------------


def test_repeat_interleave_and_tile() -> None:
    data = _make(2)
    interleaved = data.repeat(2)
    assert _uids(interleaved) == ["u0", "u0", "u1", "u1"]
    assert interleaved.batch["ids"].tolist() == [[0, 10], [0, 10], [1, 11], [1, 11]]
    assert _uids(data.repeat(3, interleave=False)) == ["u0", "u1", "u0", "u1", "u0", "u1"]


def test_pad_to_divisor_cycles_from_start() -> None:
    # 3 rows padded to 8: 5 extra rows cycle u0, u1, u2, u0, u1
    padded, pad_size = _make(3).pad_to_divisor(8)
    assert pad_size == 5
    assert _uids(padded) == ["u0", "u1", "u2", "u0", "u1", "u2", "u0", "u1"]
    assert _uids(padded.unpad(pad_size)) == ["u0", "u1", "u2"]


def test_pad_to_divisor_no_padding_needed() -> None:
    padded, pad_size = _make(4).pad_to_divisor(2)
    assert pad_size == 0 and _uids(padded) == ["u0", "u1", "u2", "u3"]
    assert len(padded.unpad(0)) == 4


def test_pad_unpad_errors() -> None:
    with pytest.raises(ValueError, match="d must be positive, got 0"):
        _make(3).pad_to_divisor(0)
    with pytest.raises(ValueError, match=r"pad_size 4 is outside \[0, 3\]"):
        _make(3).unpad(4)


def test_pad_chunk_concat_unpad_round_trip() -> None:
    data = _make(5)
    padded, pad_size = data.pad_to_divisor(4)
    restored = DataProto.concat(padded.chunk(4)).unpad(pad_size)
    np.testing.assert_array_equal(restored.batch["scores"], data.batch["scores"])
    assert _uids(restored) == _uids(data)


# --- pickling -------------------------------------------------------------------------------------


def test_pickle_protocol_5_round_trip() -> None:
    data = _make(3)
    restored = pickle.loads(pickle.dumps(data, protocol=5))
    assert restored.keys() == data.keys() and restored.meta_info == data.meta_info
    for key in data.batch:
        np.testing.assert_array_equal(restored.batch[key], data.batch[key])
        assert restored.batch[key].dtype == data.batch[key].dtype
    assert _uids(restored) == _uids(data) and restored.non_tensor["uid"].dtype == object


def test_pickle_protocol_5_buffers_are_out_of_band() -> None:
    # numpy arrays expose their memory as PickleBuffers, which is what lets Ray read them zero-copy
    data = _make(3)
    buffers: list[pickle.PickleBuffer] = []
    payload = pickle.dumps(data, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 2  # "ids" and "scores"; the object array "uid" is pickled in-band
    restored = pickle.loads(payload, buffers=buffers)
    np.testing.assert_array_equal(restored.batch["ids"], data.batch["ids"])
