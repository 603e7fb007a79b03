"""A two-turn trajectory built by hand: its masks, the learner's log-probs on the model's tokens (against a plain
transformers forward) and the loss against a hand computation, where counting the tool tokens would be wrong."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from benchmarks.harness.synthetic import adamw_section
from relay.agent.trajectory import EOS, Trajectory
from relay.engines.base import Generation
from relay.learner.grpo_loss import LossSettings
from relay.learner.learner import JaxLearner
from relay.rollout_batch import assemble_rollout
from tests.relay.learner.gradients import learner_gradients


def _token_log_probs(model_dir, prompt: list[int], response: list[int]) -> np.ndarray:
    """``log softmax(logits)`` of each response token given everything before it: a plain transformers forward."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = model(ids).logits[0].float()
    log_probs = torch.log_softmax(logits, -1)
    positions = torch.arange(len(prompt) - 1, len(prompt) + len(response) - 1)
    return log_probs[positions, torch.tensor(response)].numpy()


@pytest.fixture(scope="module")
def two_turn(tiny_model_dir):
    """Sequence 0: prompt, model turn ending in a calculator call, the result (tool tokens), a model turn ending in
    EOS. Sequence 1: the same prompt answered in one turn."""
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    enc = lambda text: tok.encode(text, add_special_tokens=False)  # noqa: E731
    prompt = enc("Tom has 2 apples and gets 3 more. How many?")
    turn1 = enc(" He has <tool_call>calculator: 2 + 3</tool_call>")
    tool = enc("<tool_result>5</tool_result>")
    turn2 = enc(" apples.\n#### 5") + [tok.eos_token_id]
    single = enc(" 5 apples.\n#### 5") + [tok.eos_token_id]
    lp = _token_log_probs(tiny_model_dir, prompt, turn1 + tool + turn2)
    t = Trajectory(list(prompt))
    t.add_model_turn(turn1, lp[: len(turn1)].tolist())
    t.add_tool_result(tool, "ok", 0.01)
    t.add_model_turn(turn2, lp[len(turn1) + len(tool) :].tolist())
    t.ended = EOS
    lp_single = _token_log_probs(tiny_model_dir, prompt, single)
    gens = [[t.generation(), Generation(single, lp_single.tolist(), finished=True)]]
    arrays = assemble_rollout([prompt], gens, pad_token_id=tok.pad_token_id or 0, bucket=8)
    return arrays, (len(turn1), len(tool), len(turn2), len(single)), lp


def test_masks_attend_to_tool_tokens_and_train_on_the_model_tokens_only(two_turn) -> None:
    arrays, (n1, nt, n2, ns), _ = two_turn
    width = arrays["responses"].shape[1]
    expected_mask = np.zeros((2, width), np.float32)
    expected_mask[0, : n1 + nt + n2] = [1] * n1 + [0] * nt + [1] * n2
    expected_mask[1, :ns] = 1
    np.testing.assert_array_equal(arrays["response_mask"], expected_mask)
    prompt_width = arrays["prompts"].shape[1]
    np.testing.assert_array_equal(
        arrays["attention_mask"][0, prompt_width:], [1] * (n1 + nt + n2) + [0] * (width - n1 - nt - n2)
    )
    assert arrays["response_length"].tolist() == [n1 + n2, ns]  # the model's tokens
    assert not arrays["rollout_log_probs"][0, n1 : n1 + nt].any()  # tool tokens carry no log-prob
    positions = arrays["position_ids"][0, prompt_width : prompt_width + n1 + nt + n2]
    assert np.all(np.diff(positions) == 1)  # tool tokens take their places in the sequence


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_learner_log_probs_and_loss_count_the_model_tokens_only(tiny_model_dir, two_turn, mode: str) -> None:
    """Advantages +1 (two-turn) and -0.5 (single-turn) on every token, tool tokens included (the mask must drop
    them). On-policy ratio 1, no KL: the loss is -(mean advantage) over the model's tokens, token-mean
    ``-(1 * (n1 + n2) - 0.5 * ns) / (n1 + n2 + ns)``; seq-mean-token-mean ``-(1 - 0.5) / 2``."""
    arrays, (n1, nt, n2, ns), engine_lp = two_turn
    batch = dict(arrays)
    advantages = np.zeros_like(arrays["response_mask"])
    advantages[0, : n1 + nt + n2], advantages[1, :ns] = 1.0, -0.5
    batch["advantages"] = advantages
    loss = LossSettings(0.2, 0.2, 0.0, "low_var_kl", 1.0, old_from_batch=False, loss_agg_mode=mode)
    learner = JaxLearner(str(tiny_model_dir), adamw_section(1e-3), loss, 2)
    _, metrics, log_probs = learner_gradients(learner, batch, arrays["prompts"].shape[1])
    model = np.r_[0:n1, n1 + nt : n1 + nt + n2]
    gap = np.abs(log_probs[0, model] - engine_lp[model])
    assert gap.max() <= 1e-4, f"learner vs transformers on model tokens: {gap.max():.2e}"
    np.testing.assert_allclose(log_probs[0, model], arrays["rollout_log_probs"][0, model], atol=1e-4)
    if mode == "token-mean":
        hand = -(1.0 * (n1 + n2) - 0.5 * ns) / (n1 + n2 + ns)
        with_tool_tokens = -(1.0 * (n1 + nt + n2) - 0.5 * ns) / (n1 + nt + n2 + ns)
        assert abs(hand - with_tool_tokens) > 1e-3  # the test tells the two apart
    else:
        hand = -(1.0 - 0.5) / 2
    assert metrics["loss"] == pytest.approx(hand, abs=1e-5)
