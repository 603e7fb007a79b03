"""The JAX learner and the torch actor give the same per-token log-probs for the same weights and tokens."""

import jax
import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from relay.engines.torch_logprobs import response_log_probs as torch_log_probs
from relay.models.hf_params import load_hf_checkpoint
from relay.models.jax_logprobs import response_log_probs as jax_log_probs
from relay.models.llama_config import LlamaConfig
from relay.models.llama_flax import LlamaForCausalLM


def _padded_batch(vocab: int, prompt_len: int = 12, response_len: int = 10, pad: int = 2):
    """Left-padded prompts of different lengths, right-padded responses of different lengths."""
    rng = np.random.default_rng(0)
    b = 4
    ids = rng.integers(3, vocab, (b, prompt_len + response_len))
    mask = np.ones_like(ids)
    mask[0, :5] = 0  # short prompt
    mask[1, :1] = 0
    mask[2, prompt_len + 4 :] = 0  # short response
    mask[3, prompt_len + 1 :] = 0
    ids[mask == 0] = pad
    pos = np.clip(np.cumsum(mask, axis=1) - 1, 0, None)
    return ids, mask, pos


@pytest.mark.parametrize("fixture", ["tiny_model_dir", "tiny_untied_model_dir"])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_jax_and_torch_log_probs_agree(fixture: str, temperature: float, request: pytest.FixtureRequest) -> None:
    model_dir = request.getfixturevalue(fixture)
    cfg = LlamaConfig.from_pretrained(model_dir)
    ids, mask, pos = _padded_batch(cfg.vocab_size)
    prompt_len = 12
    model = LlamaForCausalLM(cfg)
    params = load_hf_checkpoint(model_dir, cfg)
    fn = jax.jit(lambda p, i, m, q: jax_log_probs(model, p, i, m, q, prompt_len, temperature)[0])
    got_jax = np.asarray(fn(params, ids, mask, pos))
    hf = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    got_torch = torch_log_probs(hf, ids, mask, pos, prompt_len, temperature, micro_batch_size=3)
    response_mask = mask[:, prompt_len:].astype(bool)
    assert got_jax.shape == got_torch.shape == (4, 10)
    assert np.all(np.isfinite(got_jax)) and np.all(np.isfinite(got_torch))
    assert np.abs(got_jax - got_torch)[response_mask].max() < 1e-4
    # and they are real log-probs of a ~uniform random model, not zeros
    assert np.all(got_jax[response_mask] < -5)
