"""Per-token log-probabilities of response tokens under the flax Llama, LM head on responses only.

Sequence layout (shared by every role): ``input_ids = [prompt (left-padded to P) | response
(right-padded to R)]``. The logits that predict response token ``j`` come from the hidden state at
position ``P - 1 + j``, so only the ``R`` hidden states ``[P-1, P+R-1)`` go through the
``[hidden, vocab]`` head — the prompt's ``P - 1`` positions never do.

The learner uses the general form, :func:`slot_log_probs`: the hidden states at arbitrary "slot" positions
(:mod:`relay.packing`), and the head applied a chunk of slots at a time under ``jax.checkpoint``, so neither
the forward nor the backward ever holds more than one chunk's ``[chunk, vocab]`` logits.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from relay.models.llama_config import LlamaConfig
from relay.models.llama_flax import LlamaForCausalLM, lm_head_weight
from relay.packing import HEAD_CHUNK  # response slots per LM-head chunk in slot_log_probs


def response_logits(hidden: jax.Array, params: dict, config: LlamaConfig, prompt_length: int) -> jax.Array:
    """Float32 logits ``[B, R, vocab]`` for the response positions of ``hidden`` ``[B, P+R, H]``."""
    response_len = hidden.shape[1] - prompt_length
    h = jax.lax.dynamic_slice_in_dim(hidden, prompt_length - 1, response_len, axis=1)
    w = lm_head_weight(params, config)
    return jnp.einsum("brh,vh->brv", h, w.astype(h.dtype)).astype(jnp.float32)


def token_log_probs(
    logits: jax.Array, targets: jax.Array, temperature: float, entropy_grad: bool = True
) -> tuple[jax.Array, jax.Array]:
    """``log softmax(logits / T)[target]`` and the entropy of that distribution, per position.

    ``entropy_grad=False``: the entropy is computed from ``stop_gradient`` values (same numbers), so a
    backward pass does no ``[.., vocab]`` work for it; for a loss whose entropy coefficient is 0, where the
    entropy is only a metric.
    """
    scaled = logits / temperature
    log_z = jax.nn.logsumexp(scaled, axis=-1)
    picked = jnp.take_along_axis(scaled, targets[..., None].astype(jnp.int32), axis=-1)[..., 0]
    e_scaled, e_log_z = (scaled, log_z) if entropy_grad else jax.lax.stop_gradient((scaled, log_z))
    probs = jnp.exp(e_scaled - e_log_z[..., None])
    entropy = e_log_z - jnp.sum(probs * e_scaled, axis=-1)
    return picked - log_z, entropy


def gather_slots(hidden: jax.Array, slot_index: jax.Array) -> jax.Array:
    """``hidden`` ``[B, T, H]`` at ``slot_index`` ``[B, K]`` -> ``[B, K, H]``."""
    return jnp.take_along_axis(hidden, slot_index[..., None].astype(jnp.int32), axis=1)


def slot_log_probs(
    slot_hidden: jax.Array,
    head: jax.Array,
    targets: jax.Array,
    temperature: float,
    entropy_grad: bool = True,
    chunk: int = HEAD_CHUNK,
) -> tuple[jax.Array, jax.Array]:
    """Log-probs and entropies ``[B, K]`` of ``targets`` under ``head`` ``[vocab, H]`` applied to ``slot_hidden``.

    Computed ``chunk`` slots at a time (``lax.map``), each chunk's logits rematerialised in the backward pass:
    the peak is one chunk's ``[chunk, vocab]`` float32 logits and their softmax, whatever the row width (a row
    holding a whole group's responses has ~1000 slots: 200 MB of SmolLM2 logits, 3x that with the softmax).
    Equal to :func:`token_log_probs` of the full logits (same arithmetic, per slot); ``entropy_grad`` as there.
    """
    b, k, h = slot_hidden.shape
    size = min(chunk, k)
    pad = -k % size
    flat_hidden = jnp.pad(slot_hidden, ((0, 0), (0, pad), (0, 0))).reshape(-1, size, h)
    flat_targets = jnp.pad(targets, ((0, 0), (0, pad))).reshape(-1, size)

    @jax.checkpoint
    def one_chunk(args: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        hid, t = args
        logits = jnp.einsum("kh,vh->kv", hid, head.astype(hid.dtype)).astype(jnp.float32)
        return token_log_probs(logits, t, temperature, entropy_grad)

    log_probs, entropy = jax.lax.map(one_chunk, (flat_hidden, flat_targets))
    return log_probs.reshape(b, k + pad)[:, :k], entropy.reshape(b, k + pad)[:, :k]


def response_log_probs(
    model: LlamaForCausalLM,
    params: dict,
    input_ids: jax.Array,
    attention_mask: jax.Array,
    position_ids: jax.Array,
    prompt_length: int,
    temperature: float = 1.0,
) -> tuple[jax.Array, jax.Array]:
    """Log-probs and entropies ``[B, R]`` of the response tokens ``input_ids[:, prompt_length:]``."""
    hidden = model.apply({"params": params}, input_ids, attention_mask, position_ids)
    logits = response_logits(hidden, params, model.config, prompt_length)
    return token_log_probs(logits, input_ids[:, prompt_length:], temperature)
