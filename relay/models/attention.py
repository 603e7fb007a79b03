"""The learner's attention: the segment mask, three implementations, and the choice ``train.attention: auto`` makes.

``attention_mask`` rows are read as segment ids (0: padding); a position attends to the earlier positions of its own
segment (:func:`segment_causal_mask`), and with ``branch_ids`` (shared prompts) only to its segment's prompt and its
own branch. Every implementation takes ``q`` [B, T, Hq, D] and ``k``/``v`` [B, T, Hkv, D] in the compute dtype
(the caller casts q and k back to it after RoPE) and that ``[B, T, T]`` boolean mask:

- ``xla``: Relay's blockwise attention (:func:`xla_attention`): causal query blocks under ``jax.checkpoint``, scores
  accumulated in float32 from compute-dtype q and k, recomputed in the backward pass. Any backend.
- ``dot_product_attention``: ``jax.nn.dot_product_attention(..., implementation="xla")``, JAX's unfused XLA
  attention, which materialises ``[B, Hq, T, T]`` scores. Any backend; kept as a second reference.
- ``cudnn``: ``jax.nn.dot_product_attention(..., implementation="cudnn", is_causal=True)``, cuDNN's fused
  (flash) kernel, NVIDIA GPUs with bfloat16/float16 only. ``is_causal`` lets cuDNN skip the upper triangle; the
  packed layout goes in as the boolean mask, which JAX turns into an additive bias in the compute dtype
  (``combine_bias_and_mask`` in ``jax/_src/cudnn/fused_attention_stablehlo.py``, JAX 0.10.2).

Why a dense mask for packed rows: the public ``jax.nn.dot_product_attention`` (JAX 0.10.2 and the 0.11 tree, read in
``jax/_src/nn/functions.py``) describes padding only by ``query_seq_lengths``/``key_value_seq_lengths`` (valid
tokens first, one sequence per row), which fits neither packed rows nor Relay's left-padded rows. cuDNN's packed
layout (per-row segment offsets, ``q_offsets``/``kv_offsets``) is reachable only through the private
``jax._src.cudnn.fused_attention_stablehlo.dot_product_attention`` and needs a Hopper GPU; shared prompts (branch
masks) fit no sequence-length form at all. So the mask is the one layout every case shares.

JAX's own default, ``implementation=None``, is XLA ("defaults to XLA for now", ``jax/_src/nn/functions.py``): cuDNN
runs only when asked for by name, which is what ``cudnn`` does.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from relay.models.attention_choice import ATTENTION_IMPLEMENTATIONS

QUERY_BLOCK = 128  # query rows per attention block of xla_attention
_MASK_VALUE = -1e30  # finite, so fully-masked (padding) rows stay finite instead of NaN


def segment_causal_mask(segment_ids: jax.Array, branch_ids: jax.Array | None = None) -> jax.Array:
    """[B, T] segment ids (0 = padding) -> [B, T, T] boolean: query ``q`` may attend key ``k`` when
    ``k <= q`` and both are in the same non-padding segment. With ``branch_ids`` [B, T] (shared prompts,
    :mod:`relay.packing`), ``k`` must also be on branch 0 (the segment's prompt) or on ``q``'s branch.

    Worked example: segment ids ``[1, 1, 2, 0]`` -> row 0 attends {0}, row 1 {0, 1}, row 2 {2}, row 3 {}.
    Segment ids ``[1, 1, 1, 1]`` with branch ids ``[0, 1, 2, 2]`` -> row 2 attends {0, 2}, row 3 {0, 2, 3}.
    """
    t = segment_ids.shape[1]
    causal = jnp.tril(jnp.ones((t, t), dtype=bool))
    same = segment_ids[:, :, None] == segment_ids[:, None, :]
    mask = causal[None] & same & (segment_ids > 0)[:, None, :]
    if branch_ids is not None:
        mask &= (branch_ids[:, None, :] == 0) | (branch_ids[:, :, None] == branch_ids[:, None, :])
    return mask


@jax.checkpoint
def _attention_block(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array) -> jax.Array:
    """One query block: ``q`` [B, Tq, Hkv, G, D] against ``k``/``v`` [B, Tk, Hkv, D] under ``mask`` [B, Tq, Tk].
    q·k multiplies in the inputs' dtype and accumulates in float32 (``preferred_element_type``)."""
    d = q.shape[-1]
    scores = jnp.einsum("bqhgd,bkhd->bhgqk", q, k, preferred_element_type=jnp.float32) / jnp.sqrt(jnp.float32(d))
    scores = jnp.where(mask[:, None, None, :, :], scores, _MASK_VALUE)
    probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
    return jnp.einsum("bhgqk,bkhd->bqhgd", probs, v)


def xla_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array, block: int = QUERY_BLOCK) -> jax.Array:
    """Masked softmax attention. ``q`` [B, T, Hq, D], ``k``/``v`` [B, T, Hkv, D] (grouped-query: query heads
    ``[hkv, group]`` share one key/value head), ``mask`` [B, T, T] (True: query may attend key) -> [B, T, Hq, D].

    Blockwise and causal by construction: query block ``i`` (rows ``[i*block, (i+1)*block)``) is scored only
    against keys ``[0, (i+1)*block)``, the only ones a causal mask lets it see, so the masked upper triangle
    of blocks is never computed (about half the score FLOPs at long widths). Each block runs under
    ``jax.checkpoint``: the backward pass recomputes its float32 scores instead of keeping every layer's
    ``[B, Hq, T, T]`` scores and probabilities alive, so the peak is one block's ``[B, Hq, block, T]``.

    Worked example: T = 300, block = 128 -> blocks score 128 x 128, 128 x 256 and 44 x 300 keys: 54,272
    scores instead of 90,000.
    """
    b, t, hq, d = q.shape
    hkv = k.shape[2]
    q = q.reshape(b, t, hkv, hq // hkv, d)
    outs = []
    for start in range(0, t, block):
        end = min(start + block, t)
        outs.append(_attention_block(q[:, start:end], k[:, :end], v[:, :end], mask[:, start:end, :end]))
    return jnp.concatenate(outs, axis=1).reshape(b, t, hq, d)


def library_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array, implementation: str) -> jax.Array:
    """``jax.nn.dot_product_attention`` with ``implementation`` (``"xla"`` or ``"cudnn"``) named, causal, under the
    segment mask. Rows whose mask is all False (padding) come out as a uniform average here and in
    :func:`xla_attention`; neither is ever read."""
    mask = mask[:, None, :, :]
    return jax.nn.dot_product_attention(q, k, v, mask=mask, is_causal=True, implementation=implementation)


def attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array, implementation: str) -> jax.Array:
    """Dispatch to one of :data:`ATTENTION_IMPLEMENTATIONS`."""
    if implementation == "xla":
        return xla_attention(q, k, v, mask)
    if implementation == "dot_product_attention":
        return library_attention(q, k, v, mask, "xla")
    if implementation == "cudnn":
        return library_attention(q, k, v, mask, "cudnn")
    raise ValueError(f"attention={implementation!r}: must be one of {ATTENTION_IMPLEMENTATIONS}")
