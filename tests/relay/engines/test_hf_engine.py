"""The transformers rollout engine: n samples per prompt, EOS handling, log-probs that match a re-score."""

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from relay.engines.base import SamplingSettings
from relay.engines.hf_engine import HFRolloutEngine
from relay.engines.torch_logprobs import response_log_probs
from relay.rollout_batch import assemble_rollout


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    return HFRolloutEngine(str(tiny_model_dir), eos_token_ids=[tok.eos_token_id], pad_token_id=tok.pad_token_id)


def test_generate_shapes_and_log_probs_match_rescoring(engine, tiny_model_dir) -> None:
    prompts = [[1, 100, 200, 300], [1, 400, 500]]
    sampling = SamplingSettings(n=3, max_new_tokens=12, temperature=0.8, seed=0)
    gens = engine.generate(prompts, sampling)
    assert [len(g) for g in gens] == [3, 3]
    for group in gens:
        for g in group:
            assert 1 <= len(g.token_ids) <= 12 and len(g.log_probs) == len(g.token_ids)
            assert g.finished == (g.token_ids[-1] == engine.eos_token_ids[0])
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    assert _rescored_gap(model, prompts, gens, engine.pad_token_id).max() < 1e-4


def test_seed_makes_sampling_repeatable(engine) -> None:
    s = SamplingSettings(n=2, max_new_tokens=8, seed=123)
    a = engine.generate([[1, 5, 6]], s)
    b = engine.generate([[1, 5, 6]], s)
    assert [g.token_ids for g in a[0]] == [g.token_ids for g in b[0]]


def test_load_weights_moves_the_engine_to_the_new_weights(engine, tiny_model_dir) -> None:
    from relay.engines.torch_logprobs import load_named_tensors
    from relay.models.hf_params import load_hf_checkpoint, params_to_hf
    from relay.models.llama_config import LlamaConfig

    weights = params_to_hf(load_hf_checkpoint(tiny_model_dir, LlamaConfig.from_pretrained(tiny_model_dir)))
    rng = np.random.default_rng(0)
    perturbed = {k: v + rng.normal(0, 0.05, v.shape).astype(np.float32) for k, v in weights.items()}
    assert engine.load_weights(perturbed) == sum(v.nbytes for v in perturbed.values())
    try:
        prompts = [[1, 100, 200, 300]]
        arrays = assemble_rollout(
            prompts,
            engine.generate(prompts, SamplingSettings(n=4, max_new_tokens=10, seed=1)),
            engine.pad_token_id,
            bucket=8,
        )
        old = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
        new = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
        load_named_tensors(new, perturbed)
        mask = arrays["response_mask"].astype(bool)
        args = (arrays["input_ids"], arrays["attention_mask"], arrays["position_ids"], arrays["prompts"].shape[1])
        gap_new = np.abs(response_log_probs(new, *args) - arrays["rollout_log_probs"])[mask]
        gap_old = np.abs(response_log_probs(old, *args) - arrays["rollout_log_probs"])[mask]
        assert gap_new.max() < 1e-4 and gap_old.mean() > 1e-2
        with pytest.raises(KeyError, match="weights not in the model"):
            engine.load_weights({**weights, "model.layers.9.mlp.up_proj.weight": weights["model.norm.weight"]})
        with pytest.raises(KeyError, match="weights missing"):
            engine.load_weights({k: v for k, v in weights.items() if "layers.0.mlp" not in k})
    finally:
        engine.load_weights(weights)


def test_top_k_log_probs_are_renormalised_over_the_kept_tokens(engine, tiny_model_dir) -> None:
    # With top-k on, the recorded log-prob is under the truncated distribution the token was drawn from,
    # so it is higher than under the full softmax (same convention as vLLM's processed_logprobs).
    prompts = [[1, 100, 200, 300]]
    arrays = assemble_rollout(
        prompts,
        engine.generate(prompts, SamplingSettings(n=2, max_new_tokens=6, top_k=5, seed=0)),
        engine.pad_token_id,
        bucket=8,
    )
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    full = response_log_probs(
        model, arrays["input_ids"], arrays["attention_mask"], arrays["position_ids"], arrays["prompts"].shape[1]
    )
    mask = arrays["response_mask"].astype(bool)
    assert np.all(arrays["rollout_log_probs"][mask] > full[mask] + 1.0)  # ~log(49152 / 5) higher for a flat model
    assert np.all(arrays["rollout_log_probs"][mask] >= np.log(1 / 5) - 0.5)


def _greedy_margins(model_dir, prompt: list[int], response: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per response token: (max logit - chosen token's logit, log softmax of the chosen token), teacher-forced."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(torch.tensor([prompt + response])).logits[0, len(prompt) - 1 : -1]
    chosen = torch.tensor(response)[:, None]
    margin = (logits.max(-1).values - logits.gather(1, chosen)[:, 0]).numpy()
    return margin, torch.log_softmax(logits, -1).gather(1, chosen)[:, 0].numpy()


def test_temperature_zero_is_greedy_argmax(engine, tiny_model_dir) -> None:
    prompts = [[1, 100, 200, 300], [1, 400, 500]]
    greedy = SamplingSettings(n=2, max_new_tokens=10, temperature=0.0, top_k=5, top_p=0.5, seed=3)
    a = engine.generate(prompts, greedy)
    b = engine.generate(prompts, SamplingSettings(n=1, max_new_tokens=10, temperature=0.0, seed=99))
    assert [len(g) for g in a] == [2, 2]
    for group, other, prompt in zip(a, b, prompts, strict=True):
        assert group[0].token_ids == group[1].token_ids == other[0].token_ids  # no randomness
        assert group[0] is not group[1] and group[0].token_ids is not group[1].token_ids
        margin, log_probs = _greedy_margins(tiny_model_dir, prompt, group[0].token_ids)
        assert margin.max() < 1e-4  # every token is the argmax
        np.testing.assert_allclose(group[0].log_probs, log_probs, atol=1e-4)  # log softmax(logits), no temperature
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        engine.generate(prompts, SamplingSettings(n=1, max_new_tokens=2, temperature=-1.0))


def test_sharded_bfloat16_checkpoint_loads_as_float32(tiny_sharded_qwen2_dir, tiny_qwen2_float32_dir) -> None:
    """The Qwen2.5 layout (tied, bfloat16, shards + index): transformers reads every shard and the engine's float32
    dtype widens the weights, to exactly what the learner reads; its log-probs are a float32 model's with those
    weights (< 1e-4, as for the single-file checkpoint)."""
    from relay.engines.torch_logprobs import load_named_tensors
    from relay.models.hf_params import load_hf_checkpoint, params_to_hf
    from relay.models.llama_config import LlamaConfig

    model_dir = tiny_sharded_qwen2_dir
    tok = AutoTokenizer.from_pretrained(model_dir)
    sharded = HFRolloutEngine(str(model_dir), eos_token_ids=[tok.eos_token_id], pad_token_id=tok.pad_token_id)
    learner_view = params_to_hf(load_hf_checkpoint(model_dir, LlamaConfig.from_pretrained(model_dir)))
    state = sharded.model.state_dict()
    assert {p.dtype for p in sharded.model.parameters()} == {torch.float32}
    assert state.keys() - {"lm_head.weight"} == learner_view.keys()
    for name, value in learner_view.items():
        np.testing.assert_array_equal(state[name].numpy(), value, err_msg=name)
    assert sharded.model.lm_head.weight.data_ptr() == sharded.model.model.embed_tokens.weight.data_ptr()  # tied

    prompts = [[1, 100, 200, 300], [1, 400, 500]]
    gens = sharded.generate(prompts, SamplingSettings(n=3, max_new_tokens=12, temperature=0.8, seed=0))
    reference = AutoModelForCausalLM.from_pretrained(tiny_qwen2_float32_dir, dtype=torch.float32).eval()
    load_named_tensors(reference, learner_view)  # the float32 single-file model, given the bfloat16-rounded weights
    gap = _rescored_gap(reference, prompts, gens, sharded.pad_token_id)
    print(f"sharded bf16 hf engine: |engine - float32 model| max {gap.max():.2g}")
    assert gap.max() < 1e-4


def _rescored_gap(model, prompts, gens, pad_token_id: int, temperature: float = 0.8) -> np.ndarray:
    """|engine - ``model``| per-token log-prob over every response token of ``gens`` (rescored at ``temperature``)."""
    arrays = assemble_rollout(prompts, gens, pad_token_id, bucket=8)
    ids, mask, positions = arrays["input_ids"], arrays["attention_mask"], arrays["position_ids"]
    rescored = response_log_probs(model, ids, mask, positions, arrays["prompts"].shape[1], temperature=temperature)
    return np.abs(rescored - arrays["rollout_log_probs"])[arrays["response_mask"].astype(bool)]
