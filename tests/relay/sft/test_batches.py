"""relay.sft.batches: a GSM8K tool trace in the learner's padded layout, tool results attended but not
trained, and a few supervised steps on the tiny model lowering the loss of that batch."""

import json

import numpy as np
import pytest
from transformers import AutoTokenizer

from relay.agent.tool_call import result_text
from relay.data.gsm8k import build_messages
from relay.repo import REPO_ROOT
from relay.sft.batches import chat_prompt_ids, encode_with, sft_batch, trace_generation
from relay.sft.gsm8k_traces import tool_trace


def _first_rows(count: int) -> list[dict]:
    with (REPO_ROOT / "data/gsm8k/train.jsonl").open() as f:
        return [json.loads(next(f)) for _ in range(count)]


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(str(tiny_model_dir))


def test_tool_results_are_attended_not_trained(tokenizer) -> None:
    row = _first_rows(1)[0]  # Natalia: two calculator calls
    trace = tool_trace(row["question"], row["answer"], "train-1")
    encode = encode_with(tokenizer)
    g = trace_generation(trace, encode, tokenizer.eos_token_id)
    assert g.token_ids[-1] == tokenizer.eos_token_id and g.loss_mask[-1] == 1
    results = [text for text, trained in trace.segments if not trained]
    assert results == [result_text("24"), result_text("72")]
    untrained = [t for t, m in zip(g.token_ids, g.loss_mask, strict=True) if not m]
    assert untrained == encode(results[0]) + encode(results[1])  # the tokens a rollout appends for each result
    prompt = chat_prompt_ids(tokenizer, build_messages(row["question"], "tools"))
    arrays = sft_batch([prompt], [g], tokenizer.pad_token_id or 0, bucket=16)
    n = len(g.token_ids)
    np.testing.assert_array_equal(arrays["response_mask"][0, :n], g.loss_mask)
    response_attention = arrays["attention_mask"][0, arrays["prompts"].shape[1] :]
    assert arrays["response_mask"][0, n:].sum() == 0 and response_attention[:n].all()  # tool results attended
    assert arrays["response_length"][0] == sum(g.loss_mask)


def test_a_long_response_is_cut_at_the_budget(tokenizer) -> None:
    row = _first_rows(1)[0]
    g = trace_generation(tool_trace(row["question"], row["answer"], "u"), encode_with(tokenizer), 2)
    arrays = sft_batch([[5, 6]], [g], 0, bucket=8, max_response_length=10)
    assert arrays["responses"].shape[1] == 16 and arrays["response_mask"][0, 10:].sum() == 0


def test_supervised_steps_lower_the_loss_of_their_batch(tiny_model_dir, tokenizer) -> None:
    from benchmarks.harness.synthetic import adamw_section
    from relay.learner.grpo_loss import LossSettings
    from relay.learner.learner import JaxLearner

    encode = encode_with(tokenizer)
    rows = _first_rows(4)
    traces = [tool_trace(r["question"], r["answer"], f"train-{i}") for i, r in enumerate(rows)]
    prompts = [chat_prompt_ids(tokenizer, build_messages(t.question, "tools")) for t in traces]
    gens = [trace_generation(t, encode, tokenizer.eos_token_id) for t in traces]
    batch = sft_batch(prompts, gens, tokenizer.pad_token_id or 0, bucket=16)
    settings = LossSettings(0.2, 0.2, 0.0, "low_var_kl", 1.0, old_from_batch=False, objective="sft")
    learner = JaxLearner(str(tiny_model_dir), adamw_section(3e-3), settings, 4, pack_width=512)
    losses = [learner.update(batch, batch["prompts"].shape[1])["actor/loss"] for _ in range(4)]
    assert losses[0] > np.log(learner.config.vocab_size) - 1.0  # a random model: about log(vocab) per token
    assert losses[-1] < losses[0] - 0.5, losses
