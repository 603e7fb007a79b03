"""The supervised objective (``LossSettings.objective="sft"``): golden values, the learner's loss against a
transformers forward of the same tiny model, and packed rows against padded ones."""

import jax
import numpy as np
import pytest

from benchmarks.harness.synthetic import adamw_section, rollout_layout
from relay.learner.grpo_loss import LossSettings
from relay.learner.learner import JaxLearner
from relay.learner.sft_loss import sft_loss
from tests.relay.learner.gradients import learner_gradients

SFT = LossSettings(0.2, 0.2, 0.0, "low_var_kl", 1.0, old_from_batch=False, objective="sft")
PROMPT, RESPONSE = 4, 8


def test_sft_loss_golden() -> None:
    """Trained-token log-probs [-1, -2] and [-3], a tool result (mask 0) and padding between: (1 + 2 + 3) / 3."""
    log_probs = np.array([[-1.0, -9.0, -2.0], [-3.0, 0.0, 0.0]], np.float32)
    mask = np.array([[1, 0, 1], [1, 0, 0]], np.float32)
    entropy = np.array([[0.5, 7.0, 1.0], [1.5, 0.0, 0.0]], np.float32)
    loss, metrics = sft_loss(log_probs, entropy, mask, np.float32(3.0))
    assert float(loss) == pytest.approx(2.0) and float(metrics["nll"]) == pytest.approx(2.0)
    assert float(metrics["entropy"]) == pytest.approx(1.0)


def _two_sequences(vocab: int) -> dict[str, np.ndarray]:
    """Sequence A: a 3-token prompt (one left pad) and 8 response tokens, 2 of them a tool result (attended, not
    trained); sequence B: a 4-token prompt and 5 response tokens, then padding."""
    rng = np.random.default_rng(7)
    ids = rng.integers(3, vocab, (2, PROMPT + RESPONSE)).astype(np.int32)
    attention = np.ones_like(ids)
    attention[0, 0] = 0
    attention[1, PROMPT + 5 :] = 0
    batch = rollout_layout(ids, attention, PROMPT, np.ones(2), vocab)
    batch["response_mask"][0, 3:5] = 0.0  # the tool result: read, not trained
    return batch


def _transformers_nll(model_dir, batch: dict[str, np.ndarray]) -> float:
    """The token-mean NLL of the trained response tokens, from a transformers forward of each sequence alone."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), torch_dtype=torch.float32).eval()
    total, count = 0.0, 0
    rows = zip(batch["input_ids"], batch["attention_mask"], batch["response_mask"], strict=True)
    for ids, attention, trained in rows:
        keep = attention.astype(bool)
        tokens = torch.tensor(ids[keep][None].astype(np.int64))
        with torch.no_grad():
            log_probs = torch.log_softmax(model(tokens).logits[0].double(), -1)
        first_response = int(keep[:PROMPT].sum())  # index of the first response token among the kept ones
        for j in np.flatnonzero(trained[: keep[PROMPT:].sum()]):
            position = first_response + j
            total -= float(log_probs[position - 1, tokens[0, position]])
            count += 1
    return total / count


def test_the_learner_sft_loss_is_the_transformers_nll(tiny_model_dir) -> None:
    learner = JaxLearner(str(tiny_model_dir), adamw_section(1e-3), SFT, 2, packing=False)
    batch = _two_sequences(learner.config.vocab_size)
    _, metrics, _ = learner_gradients(learner, batch, PROMPT)
    assert metrics["loss"] == pytest.approx(_transformers_nll(tiny_model_dir, batch), rel=1e-4)
    assert metrics["nll"] == metrics["loss"]


def test_packed_sft_equals_padded_sft(tiny_model_dir) -> None:
    """The same two sequences packed into one row of 24 tokens and padded in two rows: the same loss, gradients and
    update loss."""
    learners = {
        packing: JaxLearner(str(tiny_model_dir), adamw_section(1e-3), SFT, 1, packing=packing, pack_width=24)
        for packing in (False, True)
    }
    batch = _two_sequences(learners[True].config.vocab_size)
    padded, packed = (learner_gradients(learners[p], batch, PROMPT) for p in (False, True))
    (g_padded, m_padded, _), (g_packed, m_packed, _) = padded, packed
    assert m_packed["loss"] == pytest.approx(m_padded["loss"], rel=1e-5)
    for a, b in zip(jax.tree_util.tree_leaves(g_padded), jax.tree_util.tree_leaves(g_packed), strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-6)
    out = {p: learners[p].update(batch, PROMPT) for p in (False, True)}
    assert out[True]["actor/loss"] == pytest.approx(out[False]["actor/loss"], rel=1e-5)
    assert not [k for k in out[True] if k.startswith("logprob_gap/")]  # traces were not sampled: no gap to report


def test_the_validation_loss_is_the_step_loss_without_an_update(tiny_model_dir) -> None:
    """``evaluate_loss`` gives the loss the next step reports, and leaves the weights as they were."""
    learner = JaxLearner(str(tiny_model_dir), adamw_section(1e-3), SFT, 2, packing=True, pack_width=24)
    batch = _two_sequences(learner.config.vocab_size)
    before = [np.asarray(x) for x in jax.tree_util.tree_leaves(learner.params)]
    evaluated = learner.evaluate_loss(batch, PROMPT)
    for a, b in zip(before, jax.tree_util.tree_leaves(learner.params), strict=True):
        np.testing.assert_array_equal(a, np.asarray(b))
    assert evaluated["loss"] == pytest.approx(_transformers_nll(tiny_model_dir, batch), rel=1e-4)
    assert learner.update(batch, PROMPT)["actor/loss"] == pytest.approx(evaluated["loss"], rel=1e-5)
    assert learner.evaluate_loss(batch, PROMPT)["loss"] < evaluated["loss"]  # the step lowered it
