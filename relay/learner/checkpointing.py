"""Save and restore a :class:`~relay.learner.learner.JaxLearner`'s full training state.

``policy.safetensors`` holds the params under HF names (the same tensors the rollout engines load),
``optimizer.safetensors`` + ``optimizer.json`` the optimizer state by tree path, ``learner.json``
the counters (optimizer steps, i.e. the learning-rate schedule position, and the skip counters). A LoRA
learner (``model.lora``) writes ``adapters.safetensors`` + ``adapters.json`` (the stacked adapters by tree path)
instead of ``policy.*``: its base weights are the frozen model it was built from, and the optimizer state is the
adapters'.
Restoring puts every leaf back with the learner's shardings, so a resumed update is bit-for-bit the
update the uninterrupted run would have done. On several processes every process calls both
functions (gathering sharded arrays is a collective); only process 0 writes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
from jax.experimental import multihost_utils

from relay.checkpoint.tree_io import load_tree, save_tree
from relay.learner.sharding import place_host_tree
from relay.models.hf_params import hf_to_params, iter_hf_tensors, params_to_hf
from relay.models.layer_stack import is_stacked, stack_layers, unstack_layers

COUNTERS = ("optimizer_steps", "consecutive_skips", "skipped_total")


def _host(tree: Any) -> Any:
    if jax.process_count() > 1:
        return multihost_utils.process_allgather(tree, tiled=True)
    return jax.tree_util.tree_map(lambda x: jax.device_get(x), tree)


def save_learner(learner: Any, directory: Path) -> dict[str, Any]:
    """Write the learner's state into ``directory``; returns the counters written."""
    return write_learner_state(directory, gather_learner_state(learner))


def gather_learner_state(learner: Any) -> dict[str, Any]:
    """What :func:`save_learner` writes, as host arrays: the trained tree (``"adapters"`` with LoRA, else the HF-named
    ``"policy"``), ``"optimizer"`` and ``"counters"``. On several processes every one must call it (a gather), and
    it is the only part of a save that waits on the others."""
    lora = getattr(learner, "lora", None) is not None
    trained = _host(learner.adapters) if lora else params_to_hf(unstack_layers(_host(learner.params)))
    return {
        "adapters" if lora else "policy": trained,
        "optimizer": _host(learner.opt_state),
        "counters": {name: int(getattr(learner, name)) for name in COUNTERS if hasattr(learner, name)},
    }


def write_learner_state(directory: Path, state: dict[str, Any]) -> dict[str, Any]:
    """Process 0 writes :func:`gather_learner_state`'s ``state`` into ``directory``; returns the counters."""
    if jax.process_index() == 0:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        trained = "adapters" if "adapters" in state else "policy"  # policy: HF names, one tensor per layer
        save_tree(directory, trained, state[trained])
        save_tree(directory, "optimizer", state["optimizer"])
        (directory / "learner.json").write_text(json.dumps(state["counters"], indent=1))
    return state["counters"]


def load_learner(learner: Any, directory: Path) -> dict[str, Any]:
    """Restore params, optimizer state and counters saved by :func:`save_learner`."""
    directory = Path(directory)
    if getattr(learner, "lora", None) is not None:
        if not (directory / "adapters.json").exists():
            raise ValueError(f"{directory}: no adapters.json; it was not saved by a LoRA learner (model.lora)")
        host_adapters = load_tree(directory, "adapters", jax.eval_shape(lambda a: a, learner.adapters))
        learner.adapters = place_host_tree(host_adapters, learner.adapter_sharding)
        return _load_optimizer_and_counters(learner, directory)
    if not (directory / "policy.json").exists() and (directory / "adapters.json").exists():
        raise ValueError(f"{directory} holds LoRA adapters: set the run's model.lora to the one that saved it")
    shapes = jax.eval_shape(lambda p: p, learner.params)
    params_template = dict(iter_hf_tensors(unstack_layers(shapes)))
    hf = load_tree(directory, "policy", params_template)
    host_params = hf_to_params(hf, learner.config)
    if is_stacked(shapes):
        host_params = stack_layers(host_params, learner.config.num_hidden_layers)
    learner.params = place_host_tree(host_params, learner.param_sharding)
    return _load_optimizer_and_counters(learner, directory)


def _load_optimizer_and_counters(learner: Any, directory: Path) -> dict[str, Any]:
    opt_template = jax.eval_shape(lambda s: s, learner.opt_state)
    host_opt = load_tree(directory, "optimizer", opt_template)
    learner.opt_state = place_host_tree(host_opt, learner.opt_sharding)
    counters = json.loads((directory / "learner.json").read_text())
    for name, value in counters.items():
        setattr(learner, name, int(value))
    return counters
