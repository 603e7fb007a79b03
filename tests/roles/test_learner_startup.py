"""What the learner says at start-up: the attention it chose and why, then where the reference comes from."""

from dataclasses import replace

from relay.config import load_config
from relay.learner.settings import LearnerSettings
from relay.models.attention_choice import choose_attention
from roles.learner import startup_messages


def _settings(*overrides: str) -> LearnerSettings:
    loaded = load_config(overrides=list(overrides), environ={})
    return LearnerSettings.from_config(loaded.cfg, loaded.derived.as_dict())


def test_the_attention_choice_comes_first_with_its_reason() -> None:
    settings = _settings("algorithm.ref_log_prob_source=actor_ref")
    gpu = startup_messages(replace(settings, attention=choose_attention("auto", "gpu", "bfloat16")))
    assert gpu == ["train.attention: cudnn (auto on gpu with compute_dtype bfloat16: cuDNN's fused kernel)"]
    fallback = startup_messages(replace(settings, attention=choose_attention("auto", "gpu", "float32")))[0]
    assert fallback.startswith("train.attention: xla (") and "takes no float32" in fallback


def test_the_reference_and_lora_messages_say_what_the_learner_computes() -> None:
    full = startup_messages(_settings("algorithm.ref_log_prob_source=learner"))
    assert full[0] == "train.attention: xla (auto on cpu: cuDNN exists only on NVIDIA GPUs)"
    assert full[1].startswith("reference log-probs: computed by the learner before each optimizer step, from a frozen")
    lora = startup_messages(_settings("model.lora.rank=4", "algorithm.ref_log_prob_source=auto"))
    assert lora[1].startswith("model.lora: rank 4 on ") and "the base weights, adapters off" in lora[2]


def test_the_settings_are_what_the_config_and_derived_say() -> None:
    s = _settings("train.compute_dtype=bfloat16", "learner.accelerator=gpu", "rollout.dtype=bfloat16")
    assert s.attention.implementation == "cudnn" and s.weight_sync_dtype == "bfloat16"
    assert s.lora is None and isinstance(s.optimizer, dict) and isinstance(s.mesh, dict)
