"""LoRA adapters on the flax Llama: a fresh adapter changes nothing, a trained one equals its merged weights,
gradients reach the adapters, and the PEFT names and config are PEFT's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relay.models.hf_params import load_hf_checkpoint
from relay.models.layer_stack import stack_layers
from relay.models.llama_config import LlamaConfig
from relay.models.llama_flax import Linear, LlamaForCausalLM
from relay.models.lora import init_adapters, lora_delta, merged_weights, peft_config, peft_state_dict
from relay.models.lora_spec import LoraSpec


def test_lora_delta_golden() -> None:
    """The module docstring's example: W = I, A = I, B = [[0, 1], [0, 0]], s = 2, x = [0, 1] -> y = [2, 1]."""
    x, a, b = jnp.array([0.0, 1.0]), jnp.eye(2), jnp.array([[0.0, 1.0], [0.0, 0.0]])
    np.testing.assert_allclose(np.asarray(x @ jnp.eye(2).T + lora_delta(x, a, b, 2.0)), [2.0, 1.0])


def test_adapter_dropout_golden() -> None:
    """PEFT's ``(dropout(x) A^T) B^T``: with W = 0, A = B = I (1000 x 1000), s = 1 and x = 1, the output is the
    dropped-out input, each element 0 or 1 / (1 - p) = 2 at p = 0.5, about half of them 0; no ``dropout`` rng
    (every forward but the learner's update) means no dropout: the output is x."""
    n = 1000
    layer = Linear(n, lora_dropout=0.5)
    variables = {"params": {"weight": jnp.zeros((n, n))}, "lora": {"lora_A": jnp.eye(n), "lora_B": jnp.eye(n)}}
    x = jnp.ones((n,))
    np.testing.assert_array_equal(np.asarray(layer.apply(variables, x)), np.ones(n))
    y = np.asarray(layer.apply(variables, x, rngs={"dropout": jax.random.PRNGKey(0)}))
    assert set(np.unique(y)) == {0.0, 2.0}
    assert 0.45 < float((y == 0).mean()) < 0.55
    again = np.asarray(layer.apply(variables, x, rngs={"dropout": jax.random.PRNGKey(0)}))
    np.testing.assert_array_equal(y, again)  # a key gives one mask: a resumed update draws the same
    with pytest.raises(ValueError, match=r"model.lora.dropout=1.0: must be in \[0, 1\)"):
        LoraSpec(8, 16.0, ("q_proj",), dropout=1.0)


def test_bad_specs_name_the_key() -> None:
    with pytest.raises(ValueError, match=r"model.lora.rank=0: must be >= 1"):
        LoraSpec(0, 16.0, ("q_proj",))
    with pytest.raises(ValueError, match=r"model.lora.target_modules=\['qkv'\]: each must be one of q_proj"):
        LoraSpec(8, 16.0, ("qkv",))


def _model_and_params(model_dir, scaling: float = 1.0) -> tuple[LlamaConfig, LlamaForCausalLM, dict]:
    config = LlamaConfig.from_pretrained(model_dir)
    params = stack_layers(load_hf_checkpoint(model_dir, config), config.num_hidden_layers)
    return config, LlamaForCausalLM(config, scan_layers=True, lora_scaling=scaling), params


def _inputs() -> tuple[jax.Array, jax.Array, jax.Array]:
    ids = jnp.array([[5, 9, 12, 40, 7, 3, 0, 0], [8, 8, 1, 30, 2, 6, 11, 4]], jnp.int32)
    segments = jnp.array([[1, 1, 1, 1, 1, 1, 0, 0], [1] * 8], jnp.int32)
    positions = jnp.array([[0, 1, 2, 3, 4, 5, 0, 0], list(range(8))], jnp.int32)
    return ids, segments, positions


def test_fresh_adapters_leave_the_model_unchanged_and_trained_ones_equal_their_merge(tiny_model_dir) -> None:
    spec = LoraSpec(4, 8.0, ("q_proj", "v_proj", "down_proj"))
    config, model, params = _model_and_params(tiny_model_dir, spec.scaling)
    adapters = init_adapters(config, spec, seed=0)
    ids, segments, positions = _inputs()
    base = np.asarray(model.apply({"params": params}, ids, segments, positions))
    fresh = np.asarray(model.apply({"params": params, "lora": adapters}, ids, segments, positions))
    np.testing.assert_array_equal(fresh, base)  # B = 0: exactly the base model
    rng = np.random.default_rng(1)
    trained = jax.tree_util.tree_map(lambda x: x + 0.05 * rng.standard_normal(x.shape).astype(np.float32), adapters)
    with_lora = np.asarray(model.apply({"params": params, "lora": trained}, ids, segments, positions))
    merged_params = merged_weights(params, trained, spec.scaling)
    merged = np.asarray(model.apply({"params": merged_params}, ids, segments, positions))
    real = np.asarray(segments) > 0
    assert np.abs(with_lora - base)[real].max() > 1e-3  # the adapters do change the model
    np.testing.assert_allclose(with_lora[real], merged[real], atol=1e-5)


def test_gradients_reach_only_the_adapters(tiny_model_dir) -> None:
    """With the base params a constant of the loss, the gradient tree is the adapters' tree; with B = 0 the
    gradient reaches B (and not yet A, whose gradient goes through B)."""
    spec = LoraSpec(2, 2.0, ("o_proj", "up_proj"))
    config, model, params = _model_and_params(tiny_model_dir, spec.scaling)
    adapters = init_adapters(config, spec, seed=0)
    ids, segments, positions = _inputs()

    def loss(lora: dict) -> jax.Array:
        return jnp.mean(model.apply({"params": params, "lora": lora}, ids, segments, positions) ** 2)

    grads = jax.grad(loss)(adapters)
    assert jax.tree_util.tree_structure(grads) == jax.tree_util.tree_structure(adapters)
    for module in (grads["model"]["layers"]["self_attn"]["o_proj"], grads["model"]["layers"]["mlp"]["up_proj"]):
        assert np.abs(np.asarray(module["lora_B"])).max() > 0
        assert np.abs(np.asarray(module["lora_A"])).max() == 0


def test_peft_names_shapes_and_config(tiny_model_dir) -> None:
    spec = LoraSpec(4, 8.0, ("q_proj", "gate_proj"))
    config = LlamaConfig.from_pretrained(tiny_model_dir)
    state = peft_state_dict(init_adapters(config, spec, seed=0))
    assert len(state) == config.num_hidden_layers * 2 * 2
    a = state["base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight"]
    b = state["base_model.model.model.layers.1.mlp.gate_proj.lora_B.weight"]
    assert a.shape == (4, config.hidden_size) and b.shape == (config.intermediate_size, 4)
    cfg = peft_config(spec, "base")
    assert (cfg["r"], cfg["lora_alpha"], cfg["target_modules"]) == (4, 8.0, ["gate_proj", "q_proj"])
