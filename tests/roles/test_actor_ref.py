"""The actor_ref worker (in-process, no Ray): it loads and runs only the models whose log-probs are read."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from benchmarks.speed.padded_log_probs import padded_response_log_probs
from relay.data_proto import DataProto
from roles.actor_ref import ActorRefSettings, ActorRefWorker

P, R = 12, 10


def _rollout(vocab: int, rows: int = 6) -> DataProto:
    """What the driver sends: the rollout's token layout plus the arrays of the rollout-vs-actor gap."""
    rng = np.random.default_rng(0)
    mask = np.zeros((rows, P + R), np.int32)
    for i, (p, r) in enumerate(zip(rng.integers(1, P + 1, rows), rng.integers(1, R + 1, rows), strict=True)):
        mask[i, P - p : P] = 1
        mask[i, P : P + r] = 1
    ids = np.where(mask == 1, rng.integers(3, vocab, mask.shape), 2).astype(np.int32)
    batch = {
        "input_ids": ids,
        "attention_mask": mask,
        "position_ids": np.clip(np.cumsum(mask, axis=1) - 1, 0, None).astype(np.int32),
        "response_mask": mask[:, P:].astype(np.float32),
        "rollout_log_probs": np.zeros((rows, R), np.float32),
    }
    return DataProto.from_dict(batch=batch, meta_info={"prompt_length": P, "temperature": 1.0})


def _worker(model_dir, with_ref: bool, with_actor: bool) -> ActorRefWorker:
    settings = ActorRefSettings(str(model_dir), micro_batch_size=2, reference=with_ref, actor_copy=with_actor)
    return ActorRefWorker(settings)


def _reference(model_dir, data: DataProto) -> np.ndarray:
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    args = [data.batch[k] for k in ("input_ids", "attention_mask", "position_ids")]
    return padded_response_log_probs(model, *args, P) * data.batch["response_mask"]


def test_ref_and_actor_copy_score_the_packed_batch(tiny_model_dir) -> None:
    worker = _worker(tiny_model_dir, with_ref=True, with_actor=True)
    data = _rollout(worker.ref.config.vocab_size)
    out = worker.compute_log_probs(data)
    want = _reference(tiny_model_dir, data)
    for key in ("ref_log_probs", "old_log_probs"):
        assert np.abs(out.batch[key] - want).max() < 1e-5
    m = out.meta_info["metrics"]
    assert m["actor_ref/ref_forward"] == 1.0 and out.meta_info["actor_weights_version"] == 0
    assert 0.0 <= m["batch/padding_share_actor_ref"] < 0.5  # the padded rows were over half padding
    padded_share = 1 - data.batch["attention_mask"].mean()
    assert padded_share > 0.3 and m["batch/padding_share_actor_ref"] < padded_share
    assert m["throughput/actor_ref_tokens_per_s"] > 0 and m["logprob_gap/rollout_vs_actor_max"] > 5


def test_actor_copy_alone_loads_no_reference(ray_session, tiny_model_dir) -> None:  # ready() reads Ray's context
    worker = _worker(tiny_model_dir, with_ref=False, with_actor=True)
    assert worker.ref is None and worker.actor is not None and not worker.ready()["with_ref"]
    data = _rollout(worker.actor.config.vocab_size)
    out = worker.compute_log_probs(data)
    assert set(out.batch) == {"old_log_probs"}
    assert np.abs(out.batch["old_log_probs"] - _reference(tiny_model_dir, data)).max() < 1e-5
    assert out.meta_info["metrics"]["actor_ref/ref_forward"] == 0.0


def test_reference_alone_and_nothing_at_all(tiny_model_dir) -> None:
    worker = _worker(tiny_model_dir, with_ref=True, with_actor=False)
    out = worker.compute_log_probs(_rollout(worker.ref.config.vocab_size))
    assert set(out.batch) == {"ref_log_probs"} and "actor_weights_version" not in out.meta_info
    assert worker.load_weights({}, 3) == {"seconds": 0.0, "bytes": 0}
    with pytest.raises(ValueError, match="nothing to compute"):
        _worker(tiny_model_dir, with_ref=False, with_actor=False)
