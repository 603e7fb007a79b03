"""``train.attention: auto`` and the cuDNN check: what each accelerator and dtype resolve to, and the refusals."""

import pytest

from relay.models.attention_choice import choose_attention, cudnn_problem, keeps_scores


@pytest.mark.parametrize(
    ("setting", "accelerator", "dtype", "implementation"),
    [
        ("auto", "gpu", "bfloat16", "cudnn"),
        ("auto", "gpu", "float32", "xla"),
        ("auto", "cpu", "bfloat16", "xla"),
        ("auto", "tpu", "bfloat16", "xla"),
        ("xla", "gpu", "bfloat16", "xla"),
        ("dot_product_attention", "cpu", "float32", "dot_product_attention"),
    ],
)
def test_choice_golden(setting: str, accelerator: str, dtype: str, implementation: str) -> None:
    choice = choose_attention(setting, accelerator, dtype)
    assert choice.implementation == implementation
    assert choice.message().startswith(f"train.attention: {implementation} (")


def test_the_float32_fallback_says_why() -> None:
    assert "takes no float32" in choose_attention("auto", "gpu", "float32").message()


def test_cudnn_is_refused_off_a_gpu_and_in_float32_with_the_fix() -> None:
    assert cudnn_problem("cudnn", "gpu", "bfloat16") is None
    assert cudnn_problem("xla", "cpu", "float32") is None
    off_gpu = cudnn_problem("cudnn", "cpu", "bfloat16")
    assert "learner.accelerator=gpu" in off_gpu and "'cpu'" in off_gpu and "train.attention=auto" in off_gpu
    float32 = cudnn_problem("cudnn", "gpu", "float32")
    assert "train.compute_dtype" in float32 and "'float32'" in float32


def test_only_cudnn_keeps_no_scores() -> None:
    assert [keeps_scores(i) for i in ("xla", "dot_product_attention", "cudnn")] == [True, True, False]
