"""Per-token log-probabilities of response tokens under the flax Llama, LM head on responses only.

Sequence layout (shared by every role): ``input_ids = [prompt (left-padded to P) | response
(right-padded to R)]``. The logits that predict response token ``j`` come from the hidden state at
position ``P - 1 + j``, so only the ``R`` hidden states ``[P-1, P+R-1)`` go through the
``[hidden, vocab]`` head — the prompt's ``P - 1`` positions never do.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from relay.models.llama_config import LlamaConfig
from relay.models.llama_flax import LlamaForCausalLM, lm_head_weight


def response_logits(hidden: jax.Array, params: dict, config: LlamaConfig, prompt_length: int) -> jax.Array:
    """Float32 logits ``[B, R, vocab]`` for the response positions of ``hidden`` ``[B, P+R, H]``."""
    response_len = hidden.shape[1] - prompt_length
    h = jax.lax.dynamic_slice_in_dim(hidden, prompt_length - 1, response_len, axis=1)
    w = lm_head_weight(params, config)
    return jnp.einsum("brh,vh->brv", h, w.astype(h.dtype)).astype(jnp.float32)


def token_log_probs(logits: jax.Array, targets: jax.Array, temperature: float) -> tuple[jax.Array, jax.Array]:
    """``log softmax(logits / T)[target]`` and the entropy of that distribution, per position."""
    scaled = logits / temperature
    log_z = jax.nn.logsumexp(scaled, axis=-1)
    picked = jnp.take_along_axis(scaled, targets[..., None].astype(jnp.int32), axis=-1)[..., 0]
    probs = jax.nn.softmax(scaled, axis=-1)
    entropy = log_z - jnp.sum(probs * scaled, axis=-1)
    return picked - log_z, entropy


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
