"""Which attention implementation the learner runs (``train.attention``), decided without importing JAX: the
configuration checks and the memory estimate ask it before any actor starts. :mod:`relay.models.attention` holds
the implementations themselves and what each computes."""

from __future__ import annotations

from dataclasses import dataclass

ATTENTION_IMPLEMENTATIONS = ("xla", "dot_product_attention", "cudnn")
ATTENTION_SETTINGS = ("auto", *ATTENTION_IMPLEMENTATIONS)  # train.attention
# The compute dtypes cuDNN's fused kernel runs in: it takes bfloat16 or float16 q/k/v, no float32 (jax
# check_is_flash_attention), and train.compute_dtype offers float32 and bfloat16.
CUDNN_DTYPES = ("bfloat16",)


@dataclass(frozen=True)
class AttentionChoice:
    """The implementation ``train.attention`` resolved to, and why (the learner prints it at start-up)."""

    implementation: str
    reason: str

    def message(self) -> str:
        return f"train.attention: {self.implementation} ({self.reason})"


def choose_attention(setting: str, accelerator: str, compute_dtype: str) -> AttentionChoice:
    """``auto``: cuDNN's fused kernel on a GPU in bfloat16, Relay's blockwise XLA attention everywhere else; an
    explicit setting is kept. Configuration validation rejects ``cudnn`` off a GPU or in float32 before any actor
    starts (:func:`cudnn_problem`).

    >>> choose_attention("auto", "gpu", "bfloat16").implementation
    'cudnn'
    >>> choose_attention("auto", "gpu", "float32").implementation
    'xla'
    """
    if setting != "auto":
        return AttentionChoice(setting, "set explicitly")
    if accelerator != "gpu":
        return AttentionChoice("xla", f"auto on {accelerator}: cuDNN exists only on NVIDIA GPUs")
    if compute_dtype not in CUDNN_DTYPES:
        return AttentionChoice(
            "xla", f"auto on gpu with compute_dtype {compute_dtype}: cuDNN's fused kernel takes no float32"
        )
    return AttentionChoice("cudnn", f"auto on gpu with compute_dtype {compute_dtype}: cuDNN's fused kernel")


def cudnn_problem(setting: str, accelerator: str, compute_dtype: str) -> str | None:
    """Why ``train.attention=cudnn`` cannot run with this learner, or None (it can, or another setting is chosen)."""
    if setting != "cudnn":
        return None
    if accelerator != "gpu":
        return (
            f"train.attention=cudnn needs learner.accelerator=gpu (got {accelerator!r}); "
            "set train.attention=auto or xla"
        )
    if compute_dtype not in CUDNN_DTYPES:
        return (
            f"train.attention=cudnn needs train.compute_dtype bfloat16 (got {compute_dtype!r}): cuDNN's fused "
            "kernel takes no float32; set train.compute_dtype=bfloat16 or train.attention=auto"
        )
    return None


def keeps_scores(implementation: str) -> bool:
    """Whether an implementation's peak memory grows with ``T**2`` scores (the learner's memory estimate)."""
    return implementation != "cudnn"
