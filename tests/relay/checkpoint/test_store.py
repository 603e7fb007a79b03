"""Checkpoint directories: atomic writes, newest-first listing, pruning, resume targets; tree round trip."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from relay.checkpoint import (
    CheckpointError,
    checkpoint_path,
    export_hf_checkpoint,
    latest_checkpoint,
    list_checkpoints,
    load_tree,
    prune_checkpoints,
    resolve_resume,
    save_tree,
    write_atomically,
)


def _save(run_dir, step):
    return write_atomically(checkpoint_path(run_dir, step), lambda d: (d / "driver.json").write_text("{}"))


def test_atomic_write_and_listing(tmp_path) -> None:
    for step in (2, 10, 4):
        _save(tmp_path, step)
    assert [s for s, _ in list_checkpoints(tmp_path)] == [2, 4, 10]
    assert latest_checkpoint(tmp_path).name == "step_000010"


def test_a_crash_mid_write_leaves_nothing_that_counts(tmp_path) -> None:
    _save(tmp_path, 2)

    def crash(d):
        (d / "half.bin").write_bytes(b"x")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomically(checkpoint_path(tmp_path, 4), crash)
    assert latest_checkpoint(tmp_path).name == "step_000002"
    assert not list((tmp_path / "checkpoints").glob(".tmp-*"))
    # a leftover temp dir from a killed process is ignored, then cleaned by the next save of that step
    (tmp_path / "checkpoints" / ".tmp-step_000004-999").mkdir()
    assert latest_checkpoint(tmp_path).name == "step_000002"
    _save(tmp_path, 4)
    assert not list((tmp_path / "checkpoints").glob(".tmp-*"))


def test_prune_keeps_the_newest(tmp_path) -> None:
    for step in (1, 2, 3, 4):
        _save(tmp_path, step)
    assert [p.name for p in prune_checkpoints(tmp_path, 2)] == ["step_000001", "step_000002"]
    assert [s for s, _ in list_checkpoints(tmp_path)] == [3, 4]
    assert prune_checkpoints(tmp_path, 0) == []


def test_resolve_resume_targets(tmp_path) -> None:
    with pytest.raises(CheckpointError, match="no checkpoint yet"):
        resolve_resume(tmp_path)
    _save(tmp_path, 3)
    assert resolve_resume(tmp_path) == (tmp_path, checkpoint_path(tmp_path, 3), [])
    assert resolve_resume(checkpoint_path(tmp_path, 3)) == (tmp_path, checkpoint_path(tmp_path, 3), [])
    with pytest.raises(CheckpointError, match="no such run directory"):
        resolve_resume(tmp_path / "nope")


def test_resume_refuses_a_checkpoint_that_holds_a_pickle(tmp_path) -> None:
    import pickle

    checkpoint = _save(tmp_path, 2)
    (checkpoint / "learner").mkdir()
    # a safetensors header length may start with the bytes of a pickle header: such a file is not refused
    (checkpoint / "learner" / "policy.safetensors").write_bytes(b"\x80\x02" + b"\0" * 6)
    assert resolve_resume(tmp_path) == (tmp_path, checkpoint, [])
    (checkpoint / "inflight.pkl").write_bytes(pickle.dumps({"step": 2}))
    with pytest.raises(CheckpointError, match=r"inflight\.pkl.*runs whatever code it names"):
        resolve_resume(tmp_path)
    (checkpoint / "inflight.pkl").rename(checkpoint / "state.dat")  # a pickle under another name: its first bytes
    with pytest.raises(CheckpointError, match=r"state\.dat"):
        resolve_resume(checkpoint)


def test_optimizer_state_round_trip_is_exact_and_checked(tmp_path) -> None:
    params = {"a": jnp.arange(6.0).reshape(2, 3), "b": {"c": jnp.ones(4)}}
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3))
    state = tx.init(params)
    _, state = tx.update(jax.tree_util.tree_map(jnp.ones_like, params), state, params)
    sidecar = save_tree(tmp_path, "optimizer", state)
    assert any("mu" in leaf["path"] for leaf in sidecar["leaves"])
    back = load_tree(tmp_path, "optimizer", jax.eval_shape(tx.init, params))
    for x, y in zip(jax.tree_util.tree_leaves(state), jax.tree_util.tree_leaves(back), strict=True):
        np.testing.assert_array_equal(np.asarray(x), y)
    other = optax.sgd(1e-3).init(params)
    with pytest.raises(ValueError, match="does not match"):
        load_tree(tmp_path, "optimizer", other)
    wrong = jax.eval_shape(tx.init, {"a": jnp.zeros((3, 3)), "b": {"c": jnp.ones(4)}})
    with pytest.raises(ValueError, match=r"float32\[2, 3\] in the checkpoint but float32\[3, 3\] here"):
        load_tree(tmp_path, "optimizer", wrong)


def test_hf_export_loads_in_transformers(tmp_path, tiny_model_dir) -> None:
    from safetensors.numpy import load_file
    from transformers import AutoModelForCausalLM

    weights = load_file(str(next(tiny_model_dir.glob("*.safetensors"))))
    weights = {k: v + 1.0 for k, v in weights.items()}
    out = export_hf_checkpoint(tmp_path / "hf", weights, tiny_model_dir)
    assert json.loads((out / "config.json").read_text())["model_type"] == "llama"
    assert (out / "tokenizer.json").exists() or (out / "tokenizer_config.json").exists()
    model = AutoModelForCausalLM.from_pretrained(out)
    emb = model.get_input_embeddings().weight.detach().numpy()
    np.testing.assert_array_equal(emb, weights["model.embed_tokens.weight"])
