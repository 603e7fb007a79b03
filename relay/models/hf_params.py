"""HF tensor names <-> the flax parameter tree of :mod:`relay.models.llama_flax`.

The two differ only in nesting, never in layout, so the round trip is bit-exact (dtype kept; :func:`load_hf_checkpoint`
reads any checkpoint as float32, so a float32 checkpoint round-trips bit for bit)::

    "model.layers.3.self_attn.q_proj.weight" <-> params["model"]["layers_3"]["self_attn"]["q_proj"]["weight"]
    "model.layers.3.self_attn.q_proj.bias"   <-> params["model"]["layers_3"]["self_attn"]["q_proj"]["bias"]
    "model.embed_tokens.weight"               <->  params["model"]["embed_tokens"]
    "lm_head.weight" (untied models only)     <->  params["lm_head"]["weight"]

This holds for every family :class:`~relay.models.llama_config.LlamaConfig` accepts (Llama, with or
without ``attention_bias``/``mlp_bias``, and Qwen2, whose q/k/v projections carry biases). A checkpoint
whose tensor names or shapes differ from what the model declares for its config is refused.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from relay.models.checkpoint_files import read_float32, weight_files
from relay.models.llama_config import LlamaConfig
from relay.models.llama_flax import LlamaForCausalLM

_EMBED = "model.embed_tokens.weight"
_LM_HEAD = "lm_head.weight"


def _tree_path(hf_name: str) -> tuple[str, ...]:
    if hf_name == _EMBED:
        return ("model", "embed_tokens")
    parts = hf_name.split(".")
    out: list[str] = []
    i = 0
    while i < len(parts):
        if parts[i] == "layers" and i + 1 < len(parts) and parts[i + 1].isdigit():
            out.append(f"layers_{parts[i + 1]}")
            i += 2
        else:
            out.append(parts[i])
            i += 1
    return tuple(out)


def _hf_name(path: tuple[str, ...]) -> str:
    if path == ("model", "embed_tokens"):
        return _EMBED
    parts = []
    for p in path:
        if p.startswith("layers_") and p[len("layers_") :].isdigit():
            parts += ["layers", p[len("layers_") :]]
        else:
            parts.append(p)
    return ".".join(parts)


def hf_to_params(state: Mapping[str, np.ndarray], config: LlamaConfig) -> dict:
    """Nest an HF state dict into the flax tree (arrays are not copied)."""
    params: dict = {}
    for name, value in state.items():
        if name == _LM_HEAD and config.tie_word_embeddings:
            continue  # the same tensor as the embedding
        if name.endswith("rotary_emb.inv_freq"):
            continue  # a buffer, recomputed from rope_theta
        node = params
        *parents, leaf = _tree_path(name)
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    expected = config.num_hidden_layers
    got = sum(1 for k in params.get("model", {}) if k.startswith("layers_"))
    if got != expected:
        raise ValueError(f"checkpoint has {got} decoder layers but config.num_hidden_layers={expected}")
    _check_against_model(params, config)
    return params


def expected_hf_shapes(config: LlamaConfig) -> dict[str, tuple[int, ...]]:
    """HF name -> shape of every tensor the flax model declares for ``config`` (abstract init, no memory)."""
    model = LlamaForCausalLM(config)
    ids = jax.ShapeDtypeStruct((1, 1), jnp.int32)
    tree = jax.eval_shape(lambda i: model.init(jax.random.PRNGKey(0), i, i, i)["params"], ids)
    shapes = {name: tuple(leaf.shape) for name, leaf in iter_hf_tensors(tree)}
    if not config.tie_word_embeddings:
        shapes[_LM_HEAD] = (config.vocab_size, config.hidden_size)
    return shapes


def _check_against_model(params: Mapping, config: LlamaConfig) -> None:
    """Refuse missing, unexpected (e.g. a bias the config does not declare) or mis-shaped tensors."""
    want = expected_hf_shapes(config)
    got = {name: tuple(np.shape(value)) for name, value in iter_hf_tensors(params)}
    problems = [f"missing {n}" for n in sorted(want.keys() - got.keys())]
    problems += [f"unexpected {n}" for n in sorted(got.keys() - want.keys())]
    problems += [
        f"{n} has shape {got[n]}, expected {want[n]}" for n in sorted(want.keys() & got.keys()) if got[n] != want[n]
    ]
    if problems:
        shown = "; ".join(problems[:6]) + (f"; ... ({len(problems)} problems)" if len(problems) > 6 else "")
        raise ValueError(f"checkpoint does not match config (model_type={config.model_type!r}): {shown}")


def iter_hf_tensors(params: Mapping) -> Iterator[tuple[str, np.ndarray]]:
    """Yield ``(hf_name, array)`` for every leaf of the flax tree, in a stable order."""

    def walk(node: Mapping, prefix: tuple[str, ...]) -> Iterator[tuple[str, np.ndarray]]:
        for key in sorted(node):
            value = node[key]
            if isinstance(value, Mapping):
                yield from walk(value, (*prefix, key))
            else:
                yield _hf_name((*prefix, key)), value

    yield from walk(params, ())


def params_to_hf(params: Mapping) -> dict[str, np.ndarray]:
    """Flatten the flax tree to HF names as host numpy arrays."""
    return {name: np.asarray(value) for name, value in iter_hf_tensors(params)}


def load_hf_checkpoint(model_dir: str | Path, config: LlamaConfig) -> dict:
    """The flax tree of an HF checkpoint directory, float32 (the learner's master weights) whatever the stored
    dtype: the shards its ``model.safetensors.index.json`` names, or every ``*.safetensors`` without an index
    (:func:`relay.models.checkpoint_files.weight_files`). A bfloat16 or float16 checkpoint widens exactly, so it
    loads the same params as its float32 copy cast to that dtype and back."""
    state: dict[str, np.ndarray] = {}
    for f in weight_files(Path(model_dir)):
        state.update(read_float32(f))
    return hf_to_params(state, config)
