"""What the learner says at start-up: the attention it chose and why, then where the reference comes from."""

from relay.learner.grpo_loss import LossSettings
from relay.models.attention_choice import choose_attention
from roles.learner import startup_messages


def test_the_attention_choice_comes_first_with_its_reason() -> None:
    loss = LossSettings(0.2, 0.2, 0.001, "low_var_kl", 1.0, old_from_batch=False)
    gpu = startup_messages(None, loss, choose_attention("auto", "gpu", "bfloat16"))
    assert gpu == ["train.attention: cudnn (auto on gpu with compute_dtype bfloat16: cuDNN's fused kernel)"]
    fallback = startup_messages(None, loss, choose_attention("auto", "gpu", "float32"))[0]
    assert fallback.startswith("train.attention: xla (") and "bfloat16/float16 only" in fallback


def test_the_reference_message_says_where_it_is_computed() -> None:
    loss = LossSettings(0.2, 0.2, 0.001, "low_var_kl", 1.0, old_from_batch=False, ref_in_learner=True)
    messages = startup_messages(None, loss, choose_attention("auto", "cpu", "float32"))
    assert messages[1].startswith("reference log-probs: computed by the learner before each optimizer step")
