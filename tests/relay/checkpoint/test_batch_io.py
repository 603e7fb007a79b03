"""A collected batch and its metrics stored as safetensors and JSON: read back exactly, unpicklable values refused."""

from __future__ import annotations

import numpy as np
import pytest

from relay.checkpoint.batch_io import load_batch, plain, save_batch
from relay.data_proto import DataProto


def _batch() -> DataProto:
    return DataProto.from_dict(
        batch={
            "responses": np.array([[5, 6], [7, 0]], np.int32),
            "rollout_log_probs": np.array([[-0.1, -1 / 3], [-2.5e-8, 0.0]], np.float32),
            "scores": np.array([1.0, np.nan]),
        },
        non_tensor={
            "uid": ["q0", "q0"],
            "raw_prompt_ids": [[1, 2, 3], [1, 2, 3]],
            "extracted_answer": ["42", None],
        },
        meta_info={"prompt_length": np.int64(16), "temperature": 0.7, "weights_version": 3},
    )


def test_a_batch_and_its_metrics_read_back_exactly(tmp_path) -> None:
    metrics = {"step": 4, "reward/mean": 1 / 3, "timing/rollout": 0.1 + 0.2, "actor/kl": float("nan")}
    save_batch(tmp_path, "step_000004", _batch(), metrics)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_000004.json", "step_000004.safetensors"]
    batch, back = load_batch(tmp_path, "step_000004")
    original = _batch()
    for key, array in original.batch.items():
        assert batch.batch[key].dtype == array.dtype
        np.testing.assert_array_equal(batch.batch[key], array)  # NaN where NaN, every bit of every float
    assert {k: list(v) for k, v in batch.non_tensor.items()} == {k: list(v) for k, v in original.non_tensor.items()}
    assert batch.meta_info == {"prompt_length": 16, "temperature": 0.7, "weights_version": 3}
    assert back["reward/mean"] == 1 / 3 and back["timing/rollout"] == 0.1 + 0.2 and np.isnan(back["actor/kl"])


def test_a_value_json_cannot_hold_is_refused_by_name(tmp_path) -> None:
    bad = _batch()
    bad.meta_info["sampler"] = object()
    with pytest.raises(TypeError, match=r"meta_info\.sampler: a object cannot be stored"):
        save_batch(tmp_path, "step_000001", bad, {})
    with pytest.raises(TypeError, match=r"metrics\.span: a tuple"):
        plain({"span": (1, 2)}, "metrics")


def test_a_missing_or_short_file_is_named(tmp_path) -> None:
    save_batch(tmp_path, "step_000002", _batch(), {})
    (tmp_path / "step_000002.safetensors").unlink()
    with pytest.raises(ValueError, match=r"step_000002\.safetensors: missing"):
        load_batch(tmp_path, "step_000002")
