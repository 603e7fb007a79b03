"""The packed actor_ref forward gives the padded forward's log-probs, computing on real tokens only."""

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

import relay.engines.torch_logprobs as torch_logprobs
from benchmarks.speed.padded_log_probs import padded_response_log_probs
from relay.engines.torch_logprobs import packed_log_probs, response_log_probs
from relay.engines.torch_packing import plan_packing

P, R = 20, 16


def _padded_batch(vocab: int, rows: int = 9, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Left-padded prompts (1..P real tokens) and right-padded responses (0..R real tokens), the rollout layout."""
    rng = np.random.default_rng(seed)
    prompt_len = rng.integers(1, P + 1, rows)
    response_len = rng.integers(0, R + 1, rows)
    prompt_len[0], response_len[1], response_len[2] = P, R, 0  # a full prompt, a full response, no response
    mask = np.zeros((rows, P + R), np.int32)
    for i in range(rows):
        mask[i, P - prompt_len[i] : P] = 1
        mask[i, P : P + response_len[i]] = 1
    ids = np.where(mask == 1, rng.integers(3, vocab, mask.shape), 2).astype(np.int32)
    return ids, mask, np.clip(np.cumsum(mask, axis=1) - 1, 0, None).astype(np.int32)


def _model(model_dir, attn: str = "sdpa") -> torch.nn.Module:
    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation=attn).eval()


@pytest.mark.parametrize("fixture", ["tiny_model_dir", "tiny_untied_model_dir"])
@pytest.mark.parametrize(("temperature", "micro_batch_size"), [(1.0, 2), (0.7, 8)])
def test_packed_equals_padded(fixture: str, temperature: float, micro_batch_size: int, request) -> None:
    model = _model(request.getfixturevalue(fixture))
    ids, mask, pos = _padded_batch(model.config.vocab_size)
    want = padded_response_log_probs(model, ids, mask, pos, P, temperature, micro_batch_size=3)
    got = response_log_probs(model, ids, mask, pos, P, temperature, micro_batch_size)
    response = mask[:, P:].astype(bool)
    assert got.shape == (len(ids), R) and got.dtype == np.float32
    assert np.abs(got - want)[response].max() < 1e-5
    assert np.all(got[~response] == 0.0) and np.all(got[response] < -5)  # real log-probs of a ~uniform model
    assert plan_packing(mask, P).rows < len(ids)  # rows did hold several sequences


def test_wider_rows_and_eager_attention_agree_too(tiny_model_dir) -> None:
    model = _model(tiny_model_dir)
    ids, mask, pos = _padded_batch(model.config.vocab_size, rows=12, seed=1)
    want = padded_response_log_probs(model, ids, mask, pos, P)
    response = mask[:, P:].astype(bool)
    plan = plan_packing(mask, P, width=3 * (P + R))
    assert plan.rows <= 5
    assert np.abs(packed_log_probs(model, plan, ids, micro_batch_size=2) - want)[response].max() < 1e-5
    # LM-head chunks that cut through a row's responses and a temperature (divided in place) change nothing.
    hot = padded_response_log_probs(model, ids, mask, pos, P, temperature=0.7)
    chunked = packed_log_probs(model, plan, ids, temperature=0.7, micro_batch_size=2, head_chunk=5)
    assert np.abs(chunked - hot)[response].max() < 1e-5 and np.abs(hot - want)[response].max() > 1e-3
    eager = response_log_probs(_model(tiny_model_dir, "eager"), ids, mask, pos, P)
    assert np.abs(eager - want)[response].max() < 1e-5


def test_shared_prompts_give_the_padded_log_probs(tiny_model_dir) -> None:
    """Groups of 3 samples of one prompt, each prompt laid out once: the padded forward's log-probs (1e-5)."""
    model = _model(tiny_model_dir)
    ids, mask, pos = _padded_batch(model.config.vocab_size, rows=9, seed=2)
    leader = np.arange(9) // 3 * 3
    ids[:, :P], mask[:, :P] = ids[leader, :P], mask[leader, :P]
    pos = np.clip(np.cumsum(mask, axis=1) - 1, 0, None).astype(np.int32)
    want = padded_response_log_probs(model, ids, mask, pos, P)
    plan = plan_packing(mask, P, width=P + 3 * R, input_ids=ids)
    assert plan.shared_prompt_share > 0.2
    got = packed_log_probs(model, plan, ids, micro_batch_size=2)
    assert np.abs(got - want)[mask[:, P:].astype(bool)].max() < 1e-5


def test_the_block_diagonal_mask_is_what_keeps_sequences_apart(tiny_model_dir, monkeypatch) -> None:
    """transformers takes the 4D mask as given: a plain causal mask over the packed rows changes the answer."""
    model = _model(tiny_model_dir)
    ids, mask, pos = _padded_batch(model.config.vocab_size)
    want = padded_response_log_probs(model, ids, mask, pos, P)
    monkeypatch.setattr(
        torch_logprobs,
        "block_causal_mask",
        lambda s, b=None: np.tril(np.ones((s.shape[1],) * 2, bool))[None, None].repeat(len(s), 0),
    )
    leaky = response_log_probs(model, ids, mask, pos, P)
    assert np.abs(leaky - want)[mask[:, P:].astype(bool)].max() > 1e-2


def test_refuses_other_positions_and_attention(tiny_model_dir) -> None:
    model = _model(tiny_model_dir)
    ids, mask, pos = _padded_batch(model.config.vocab_size)
    with pytest.raises(ValueError, match="position_ids differ"):
        response_log_probs(model, ids, mask, pos + 1, P)
    model.config._attn_implementation = "flash_attention_2"
    with pytest.raises(ValueError, match="attn_implementation"):
        response_log_probs(model, ids, mask, pos, P)


def test_torch_view_reads_bfloat16_host_arrays_bit_for_bit(tiny_model_dir) -> None:
    """A bfloat16 weight sync arrives as ml_dtypes arrays: torch sees the same bits, and loading them into a float32
    model (the actor copy) equals loading the float32 weights rounded the way torch rounds."""
    import ml_dtypes

    from relay.engines.torch_logprobs import load_named_tensors, torch_view

    weights = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
    viewed = torch_view(weights.astype(ml_dtypes.bfloat16))
    assert viewed.dtype == torch.bfloat16
    assert torch.equal(viewed, torch.from_numpy(weights).to(torch.bfloat16))
    model = _model(tiny_model_dir)
    state = {n: p.detach().numpy().copy() for n, p in model.named_parameters()}
    load_named_tensors(model, {n: v.astype(ml_dtypes.bfloat16) for n, v in state.items()})
    for name, param in model.named_parameters():
        assert torch.equal(param, torch.from_numpy(state[name]).to(torch.bfloat16).float()), name
