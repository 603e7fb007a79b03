"""HF checkpoint <-> flax tree conversion is a bit-exact rename."""

import numpy as np
import pytest
from safetensors.numpy import load_file

from relay.models.hf_params import hf_to_params, load_hf_checkpoint, params_to_hf
from relay.models.llama_config import LlamaConfig, ModelConfigError


@pytest.mark.parametrize("fixture", ["tiny_model_dir", "tiny_untied_model_dir"])
def test_round_trip_is_bit_exact(fixture: str, request: pytest.FixtureRequest) -> None:
    model_dir = request.getfixturevalue(fixture)
    cfg = LlamaConfig.from_pretrained(model_dir)
    state = load_file(str(model_dir / "model.safetensors"))
    back = params_to_hf(load_hf_checkpoint(model_dir, cfg))
    expected = {k for k in state if not (k == "lm_head.weight" and cfg.tie_word_embeddings)}
    assert set(back) == expected
    for name in expected:
        assert back[name].dtype == state[name].dtype
        np.testing.assert_array_equal(back[name], state[name])


def test_tree_layout_names(tiny_model_dir) -> None:
    cfg = LlamaConfig.from_pretrained(tiny_model_dir)
    params = load_hf_checkpoint(tiny_model_dir, cfg)
    q = params["model"]["layers_1"]["self_attn"]["q_proj"]["weight"]
    assert q.shape == (cfg.num_attention_heads * cfg.head_dim, cfg.hidden_size)  # HF [out, in] layout
    assert params["model"]["embed_tokens"].shape == (cfg.vocab_size, cfg.hidden_size)
    assert "lm_head" not in params  # tied


def test_layer_count_mismatch_is_reported(tiny_model_dir) -> None:
    cfg = LlamaConfig.from_pretrained(tiny_model_dir)
    state = load_file(str(tiny_model_dir / "model.safetensors"))
    dropped = {k: v for k, v in state.items() if ".layers.1." not in k}
    with pytest.raises(ValueError, match="1 decoder layers but config.num_hidden_layers=2"):
        hf_to_params(dropped, cfg)


def test_unsupported_architecture_is_named() -> None:
    with pytest.raises(ModelConfigError, match="model_type='gpt2'"):
        LlamaConfig.from_hf_dict({"model_type": "gpt2"})
    with pytest.raises(ModelConfigError, match="rope_type='yarn'"):
        LlamaConfig.from_hf_dict(
            {
                "model_type": "llama",
                "vocab_size": 8,
                "hidden_size": 8,
                "intermediate_size": 8,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "rope_parameters": {"rope_type": "yarn"},
            }
        )
