"""The vLLM engine on CPU: n samples with log-probs, in-memory weight sync, same DataProto as the hf engine."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from relay.engines.base import SamplingSettings
from relay.models.hf_params import load_hf_checkpoint, params_to_hf
from relay.models.llama_config import LlamaConfig
from relay.rollout_batch import assemble_rollout
from tests.relay.engines.rescoring import rescored_gap

PROMPTS = [[1, 100, 200, 300], [1, 400, 500]]
SAMPLING = SamplingSettings(n=3, max_new_tokens=12, temperature=0.8, seed=0)


@pytest.fixture(scope="module")
def vllm_engine(tiny_model_dir):
    """One in-process vLLM engine (tied tiny model) for this module."""
    from relay.engines.vllm_engine import VLLMRolloutEngine

    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{(os.cpu_count() or 1) - 1}")
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    return VLLMRolloutEngine(
        str(tiny_model_dir), [tok.eos_token_id], max_model_len=256, gpu_memory_utilization=0.3, kv_cache_gib=0.25
    )


def _gap(model_dir, arrays, weights=None) -> np.ndarray:
    return rescored_gap(model_dir, arrays, SAMPLING.temperature, weights)


def test_n_samples_per_prompt_with_log_probs(vllm_engine, tiny_model_dir) -> None:
    gens = vllm_engine.generate(PROMPTS, SAMPLING)
    assert [len(g) for g in gens] == [3, 3]
    for group in gens:
        assert len({tuple(g.token_ids) for g in group}) > 1  # n distinct samples, not one repeated
        for g in group:
            assert 1 <= len(g.token_ids) <= 12 and len(g.log_probs) == len(g.token_ids)
    arrays = assemble_rollout(PROMPTS, gens, pad_token_id=2, bucket=8)
    gap = _gap(tiny_model_dir, arrays)
    assert gap.mean() < 1e-4 and gap.max() < 1e-3


def test_sync_moves_vllm_to_the_new_weights(vllm_engine, tiny_model_dir) -> None:
    weights = params_to_hf(load_hf_checkpoint(tiny_model_dir, LlamaConfig.from_pretrained(tiny_model_dir)))
    rng = np.random.default_rng(0)
    perturbed = {k: v + rng.normal(0, 0.05, v.shape).astype(np.float32) for k, v in weights.items()}
    vllm_engine.load_weights(perturbed)
    try:
        arrays = assemble_rollout(PROMPTS, vllm_engine.generate(PROMPTS, SAMPLING), pad_token_id=2, bucket=8)
        gap_new = _gap(tiny_model_dir, arrays, perturbed)
        gap_old = _gap(tiny_model_dir, arrays)
        assert gap_new.mean() < 1e-4 and gap_new.max() < 1e-3  # tied head included (lm_head follows the embedding)
        assert gap_old.mean() > 0.05
    finally:
        vllm_engine.load_weights(weights)


def test_hf_and_vllm_give_the_same_fields_and_shapes(vllm_engine, tiny_model_dir) -> None:
    from relay.engines.hf_engine import HFRolloutEngine

    hf = HFRolloutEngine(str(tiny_model_dir), eos_token_ids=[2], pad_token_id=2)
    sampling = SamplingSettings(n=2, max_new_tokens=16, seed=0)  # random model: runs to the length limit
    a = assemble_rollout(PROMPTS, hf.generate(PROMPTS, sampling), 2, 8)
    b = assemble_rollout(PROMPTS, vllm_engine.generate(PROMPTS, sampling), 2, 8)
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype, key
        assert a[key].shape[0] == b[key].shape[0] == 4 and a[key].ndim == b[key].ndim, key
    assert a["prompts"].shape == b["prompts"].shape


def test_temperature_zero_is_greedy_argmax(vllm_engine, tiny_model_dir) -> None:
    greedy = SamplingSettings(n=1, max_new_tokens=10, temperature=0.0)
    a = vllm_engine.generate(PROMPTS, greedy)
    b = vllm_engine.generate(PROMPTS, greedy)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    for prompt, (g,), (again,) in zip(PROMPTS, a, b, strict=True):
        assert g.token_ids == again.token_ids and 1 <= len(g.token_ids) <= 10
        with torch.no_grad():
            logits = model(torch.tensor([prompt + g.token_ids])).logits[0, len(prompt) - 1 : -1]
        chosen = torch.tensor(g.token_ids)[:, None]
        assert (logits.max(-1).values - logits.gather(1, chosen)[:, 0]).max() < 1e-3  # every token is the argmax
        expected = torch.log_softmax(logits, -1).gather(1, chosen)[:, 0].numpy()
        np.testing.assert_allclose(g.log_probs, expected, atol=1e-3)  # log softmax(logits), no temperature


def test_seeded_batch_larger_than_one_scheduler_step(vllm_engine) -> None:
    """More prompt tokens than vLLM schedules in one step (4096): with chunked prefill a prompt would be split
    and vLLM would rewind its seeded generator, which CPU generators cannot do ("CPU Generator does not use
    offset"). The engine turns chunked prefill off on CPU, so whole prompts wait for the next step instead."""
    prompts = [[1] + [100 + (i * 7 + j) % 5000 for j in range(199)] for i in range(40)]  # 8000 prompt tokens
    gens = vllm_engine.generate(prompts, SamplingSettings(n=2, max_new_tokens=4, temperature=0.7, seed=5))
    assert [len(g) for g in gens] == [2] * 40
    assert all(len(s.token_ids) == len(s.log_probs) >= 1 for g in gens for s in g)


def test_only_the_expected_rotary_reload_warning_is_dropped(vllm_engine) -> None:
    """vLLM's reload warns for RotaryEmbedding on every sync (its cos/sin cache is in no checkpoint and is kept);
    the engine drops that line only. The sync test above shows the weights still load."""
    import logging

    from vllm.model_executor.model_loader.reload import layerwise

    from relay.engines.vllm_engine import RELOAD_LOGGER, ExpectedReloadWarnings

    assert layerwise.logger.name == RELOAD_LOGGER
    assert any(isinstance(f, ExpectedReloadWarnings) for f in logging.getLogger(RELOAD_LOGGER).filters)

    def record(layer: str) -> logging.LogRecord:
        return logging.LogRecord(
            RELOAD_LOGGER, logging.WARNING, "layerwise.py", 1, "%s: Failed to load weights", (layer,), None
        )

    assert not ExpectedReloadWarnings().filter(record("RotaryEmbedding"))
    assert not ExpectedReloadWarnings().filter(record("ParallelLMHead"))  # synced in place (vllm_cpu_vocab)
    assert ExpectedReloadWarnings().filter(record("QKVParallelLinear"))


def test_the_vocabulary_not_loaded_warning_is_dropped_only_for_the_vocabulary(vllm_engine) -> None:
    """A lean engine syncs the vocabulary layers after vLLM's reload, which then warns that they were not loaded
    (the rollout's log had that line at every sync); the line is dropped when it names only them."""
    import logging

    from vllm.model_executor.model_loader.reload import inplace

    from relay.engines.vllm_engine import INPLACE_LOGGER, UNLOADED_MESSAGE, VocabSyncedInPlace

    assert inplace.logger.name == INPLACE_LOGGER
    assert vllm_engine.lean_vocab
    assert any(isinstance(f, VocabSyncedInPlace) for f in logging.getLogger(INPLACE_LOGGER).filters)

    def record(names: set[str]) -> logging.LogRecord:
        return logging.LogRecord(INPLACE_LOGGER, logging.WARNING, "inplace.py", 1, UNLOADED_MESSAGE, (names,), None)

    keep = VocabSyncedInPlace().filter
    assert not keep(record({"lm_head.weight", "model.embed_tokens.weight"}))
    assert not keep(record({"lm_head.weight"}))
    assert keep(record({"lm_head.weight", "model.layers.0.mlp.down_proj.weight"}))
    assert keep(record(set()))
    info = logging.LogRecord(INPLACE_LOGGER, logging.INFO, "inplace.py", 1, "Reloading weights inplace...", (), None)
    assert keep(info)


def test_the_cpu_vocabulary_layers_hold_no_unread_copy(vllm_engine, tiny_model_dir) -> None:
    """The untied head computes from its packed copy alone and the embedding looks up its weight alone
    (relay.engines.vllm_cpu_vocab), from the build on and after a reload; the sync test above shows both still
    take new weights."""
    from relay.engines.vllm_cpu_vocab import EMBED, HEAD, _never_read

    assert vllm_engine.lean_vocab

    def layout(model) -> tuple[int, int, bool]:
        embed, head = model.get_submodule(EMBED), model.get_submodule(HEAD)
        return embed.weight.numel(), head.weight.numel(), embed.cpu_linear is _never_read

    for reloaded in (False, True):
        if reloaded:  # the model's own weights: the other tests of this module see the same engine
            config = LlamaConfig.from_pretrained(tiny_model_dir)
            vllm_engine.load_weights(params_to_hf(load_hf_checkpoint(tiny_model_dir, config)))
        embed_numel, head_numel, embed_unpacked = vllm_engine.llm.apply_model(layout)[0]
        assert embed_numel > 0 and embed_unpacked
        assert head_numel == 0  # oneDNN (or vLLM's own kernel) packed it and the fp32 weight was dropped


def test_sync_moves_an_untied_head_to_its_own_new_weights(tiny_untied_model_dir) -> None:
    """The untied head is synced from ``lm_head.weight``, not from the embedding (relay.engines.vllm_cpu_vocab)."""
    from relay.engines.vllm_engine import VLLMRolloutEngine

    tok = AutoTokenizer.from_pretrained(tiny_untied_model_dir)
    engine = VLLMRolloutEngine(
        str(tiny_untied_model_dir), [tok.eos_token_id], max_model_len=256, gpu_memory_utilization=0.3, kv_cache_gib=0.05
    )
    weights = params_to_hf(
        load_hf_checkpoint(tiny_untied_model_dir, LlamaConfig.from_pretrained(tiny_untied_model_dir))
    )
    assert "lm_head.weight" in weights
    rng = np.random.default_rng(1)
    perturbed = {k: v + rng.normal(0, 0.05, v.shape).astype(np.float32) for k, v in weights.items()}
    engine.load_weights(perturbed)
    arrays = assemble_rollout(PROMPTS, engine.generate(PROMPTS, SAMPLING), pad_token_id=2, bucket=8)
    gap_new = _gap(tiny_untied_model_dir, arrays, perturbed)
    old_head = {**perturbed, "lm_head.weight": weights["lm_head.weight"]}
    gap_old_head = _gap(tiny_untied_model_dir, arrays, old_head)
    assert gap_new.mean() < 1e-4 and gap_new.max() < 1e-3  # the new head (not the embedding, not the old head)
    assert gap_old_head.mean() > 1e-3  # with the old head the log-probs would differ


def test_sharded_bfloat16_tied_checkpoint_loads_and_syncs(tiny_sharded_qwen2_dir) -> None:
    """The Qwen2.5 layout (tied, bfloat16, shards + index) through the untied view: vLLM's log-probs are the
    transformers model's (bfloat16 weights widened to float32, as the engine's float32 dtype loads them), and a sync
    moves the tied head with the embedding. Tolerance as for the single-file engine: mean < 1e-4, max < 1e-3."""
    from relay.engines.vllm_engine import HEAD_SHARD, VLLMRolloutEngine, untied_view

    model_dir = tiny_sharded_qwen2_dir
    view = untied_view(model_dir)
    index = json.loads((view / "model.safetensors.index.json").read_text())["weight_map"]
    assert index["lm_head.weight"] == HEAD_SHARD and len(set(index.values())) >= 3  # two shards and the head's
    tok = AutoTokenizer.from_pretrained(model_dir)
    engine = VLLMRolloutEngine(
        str(model_dir), [tok.eos_token_id], max_model_len=256, gpu_memory_utilization=0.3, kv_cache_gib=0.05
    )
    arrays = assemble_rollout(PROMPTS, engine.generate(PROMPTS, SAMPLING), pad_token_id=2, bucket=8)
    gap = _gap(model_dir, arrays)
    print(f"sharded bf16 load: |vLLM - transformers| mean {gap.mean():.2g}, max {gap.max():.2g}")
    assert gap.mean() < 1e-4 and gap.max() < 1e-3

    weights = params_to_hf(load_hf_checkpoint(model_dir, LlamaConfig.from_pretrained(model_dir)))
    rng = np.random.default_rng(2)
    perturbed = {k: v + rng.normal(0, 0.05, v.shape).astype(np.float32) for k, v in weights.items()}
    engine.load_weights(perturbed)
    arrays = assemble_rollout(PROMPTS, engine.generate(PROMPTS, SAMPLING), pad_token_id=2, bucket=8)
    gap_new = _gap(model_dir, arrays, perturbed)
    gap_old = _gap(model_dir, arrays)
    print(f"synced: |vLLM - new| mean {gap_new.mean():.2g}, max {gap_new.max():.2g}; |vLLM - old| {gap_old.mean():.2g}")
    assert gap_new.mean() < 1e-4 and gap_new.max() < 1e-3  # the tied head follows the new embedding
    assert gap_old.mean() > 0.05


def test_bfloat16_engine_sync_packs_the_head_in_bfloat16(tiny_sharded_qwen2_dir) -> None:
    """``rollout.dtype: bfloat16`` on the CPU: the in-place vocabulary sync (relay.engines.vllm_cpu_vocab) casts the
    learner's float32 head to the engine's dtype. Packed as float32 instead, the head gave NaN log-probs after the
    sync. bfloat16 activations round to ~3 significant digits, so the bound is looser than float32's: measured mean
    3e-3, max 1e-2 against the new float32 weights, 0.46 against the old ones."""
    from relay.engines.vllm_engine import VLLMRolloutEngine

    model_dir = tiny_sharded_qwen2_dir
    tok = AutoTokenizer.from_pretrained(model_dir)
    engine = VLLMRolloutEngine(
        str(model_dir),
        [tok.eos_token_id],
        max_model_len=256,
        gpu_memory_utilization=0.3,
        kv_cache_gib=0.05,
        dtype="bfloat16",
    )
    weights = params_to_hf(load_hf_checkpoint(model_dir, LlamaConfig.from_pretrained(model_dir)))
    rng = np.random.default_rng(2)
    perturbed = {k: v + rng.normal(0, 0.05, v.shape).astype(np.float32) for k, v in weights.items()}

    def dtypes() -> dict[str, str]:
        return engine.llm.apply_model(lambda model: {n: str(p.dtype) for n, p in model.named_parameters()})[0]

    loaded = dtypes()
    engine.load_weights(perturbed)
    # The sync keeps every parameter in the dtype the engine loaded it in: bfloat16 for the weights and the head
    # (vLLM's oneDNN path on AMX CPUs keeps the qkv biases in float32, the AVX2 path bfloat16).
    assert dtypes() == loaded
    assert {dtype for name, dtype in loaded.items() if not name.endswith(".bias")} == {"torch.bfloat16"}
    arrays = assemble_rollout(PROMPTS, engine.generate(PROMPTS, SAMPLING), pad_token_id=2, bucket=8)
    gap_new = _gap(model_dir, arrays, perturbed)
    gap_old = _gap(model_dir, arrays)
    print(f"bf16 synced: |vLLM - new| mean {gap_new.mean():.2g}, max {gap_new.max():.2g}; old {gap_old.mean():.2g}")
    assert gap_new.mean() < 1e-2 and gap_new.max() < 5e-2
    assert gap_old.mean() > 0.1
