"""Batch-size derivation: the README's worked example and each rule."""

import pytest

from relay.config import ConfigError, load_config


def _derived(*overrides: str):
    return load_config(overrides=list(overrides), environ={})


def test_readme_worked_example() -> None:
    d = _derived(
        "rollout.batch_size=16",
        "rollout.n=2",
        "rollout.max_prompts_per_pass_per_process=4",
        "learner.hosts=2",
        "learner.devices_per_host=4",
        "train.per_device_micro_batch_size=1",
    ).derived
    assert (d.passes_per_step, d.prompts_per_pass_per_process, d.local_batch) == (2, 4, 16)
    assert (d.micro_batch_size, d.grad_accum_steps, d.local_device_count) == (4, 4, 4)
    assert d.sequences_global_per_step == 32 and d.effective_global_prompts == 16


def test_no_passes_and_whole_batch_micro_by_default() -> None:
    d = _derived("rollout.batch_size=8", "rollout.n=4").derived
    assert (d.passes_per_step, d.prompts_per_pass_per_process, d.local_batch, d.micro_batch_size) == (1, 8, 32, 32)
    assert d.grad_accum_steps == 1 and d.optimizer_steps_per_step == 1


def test_padding_for_devices_raises_effective_prompts_and_warns() -> None:
    # 5 prompts x 2 samples = 10 sequences do not split over 4 devices; 6 x 2 = 12 do.
    loaded = _derived("rollout.batch_size=5", "rollout.n=2", "learner.devices_per_host=4", "train.micro_batch_size=4")
    assert loaded.derived.effective_global_prompts == 6 and loaded.derived.local_batch == 12
    assert any("rollout.batch_size=5 becomes 6 prompts per step (+1)" in w for w in loaded.warnings)
    assert not _derived("rollout.batch_size=8").warnings


def test_pass_size_must_fit_the_devices() -> None:
    with pytest.raises(ConfigError, match=r"rollout.max_prompts_per_pass_per_process=1: a pass needs 2 prompts"):
        _derived(
            "rollout.batch_size=4",
            "rollout.n=2",
            "rollout.max_prompts_per_pass_per_process=1",
            "learner.devices_per_host=4",
            "train.micro_batch_size=4",
        )


def test_micro_batch_rules() -> None:
    assert _derived("train.per_device_micro_batch_size=2", "learner.devices_per_host=2").derived.micro_batch_size == 4
    with pytest.raises(ConfigError, match="two spellings of one setting at the same level; set only one"):
        _derived("train.micro_batch_size=4", "train.per_device_micro_batch_size=2")
    with pytest.raises(ConfigError, match=r"train.micro_batch_size=6 must divide derived.local_batch=32"):
        _derived("train.micro_batch_size=6")
    with pytest.raises(ConfigError, match=r"train.micro_batch_size=2 must divide by learner.devices_per_host=4"):
        _derived("train.micro_batch_size=2", "learner.devices_per_host=4")


def test_mini_batches_and_epochs_count_optimizer_steps() -> None:
    d = _derived(
        "rollout.batch_size=8",
        "train.mini_batch_size=2",
        "train.ppo_epochs=3",
        "algorithm.old_log_prob_source=actor",
        "trainer.total_training_steps=10",
        "train.optimizer.lr_schedule.warmup_ratio=0.1",
    ).derived
    assert (d.local_mini_batch, d.optimizer_steps_per_step, d.total_optimizer_steps, d.warmup_steps) == (8, 12, 120, 12)
    with pytest.raises(ConfigError, match=r"train.micro_batch_size=16 must divide derived.local_mini_batch=8"):
        _derived("train.mini_batch_size=2", "train.micro_batch_size=16", "algorithm.old_log_prob_source=actor")


@pytest.mark.parametrize(
    ("overrides", "dtype"),
    [
        ((), "float32"),  # a float32 engine takes float32
        (("rollout.dtype=bfloat16", "train.compute_dtype=bfloat16"), "bfloat16"),
        (("rollout.dtype=bfloat16",), "bfloat16"),  # no actor copy: the engine is the only reader
        (("rollout.dtype=float16", "algorithm.old_log_prob_source=rollout"), "float16"),
        # an actor copy of a float32 learner must read float32 weights
        (("rollout.dtype=bfloat16", "algorithm.old_log_prob_source=actor"), "float32"),
        (
            ("rollout.dtype=bfloat16", "train.compute_dtype=bfloat16", "algorithm.old_log_prob_source=actor"),
            "bfloat16",
        ),
    ],
)
def test_weight_sync_dtype(overrides: tuple[str, ...], dtype: str) -> None:
    assert _derived(*overrides).derived.weight_sync_dtype == dtype


def test_cudnn_attention_off_a_gpu_is_refused_naming_the_key_and_the_fix() -> None:
    with pytest.raises(ConfigError, match=r"train.attention=cudnn needs learner.accelerator=gpu \(got 'cpu'\)"):
        _derived("train.attention=cudnn")
    with pytest.raises(ConfigError, match=r"train.attention=cudnn needs train.compute_dtype bfloat16"):
        _derived("train.attention=cudnn", "learner.accelerator=gpu")
