"""The learner's update on 8 fake CPU devices under several meshes, against the single-device update.

Run by ``test_sharding.py`` in its own process, with ``XLA_FLAGS=--xla_force_host_platform_device_count=8``
set before JAX starts. Prints ``RESULT <json>``: per mesh, the loss and grad norm of the step, the
largest parameter difference from the single-device run, and how ``q_proj`` / ``down_proj`` are split.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.harness.synthetic import (
    adamw_section,  # noqa: E402
    synthetic_batch,  # noqa: E402
)
from relay.learner.grpo_loss import LossSettings  # noqa: E402
from relay.learner.learner import JaxLearner  # noqa: E402

MESHES = {
    "dp8": {"dp": 8},
    "fsdp8": {"fsdp": 8},
    "dp2_fsdp2_tp2": {"dp": 2, "fsdp": 2, "tp": 2},
    "fsdp4_tp2": {"fsdp": 4, "tp": 2},
}
P, R, ROWS = 8, 8, 16


def sgd(lr: float) -> dict:
    return {**adamw_section(lr), "name": "sgd"}


def run(model_dir: str, mesh: dict, devices: list, micro: int) -> tuple[dict, dict, dict]:
    loss = LossSettings(0.2, 0.2, 0.01, "low_var_kl", 1.0, old_from_batch=False, loss_agg_mode="token-mean")
    learner = JaxLearner(model_dir, sgd(0.5), loss, micro, mesh=mesh, devices=devices)
    batch = synthetic_batch(ROWS, P, R, learner.config.vocab_size, seed=3)
    before = learner.export_hf()
    metrics = learner.update(batch, P)
    layers = learner.params["model"]["layers"]  # stacked [L, out, in]: a shard's layer axis is whole
    q, down = layers["self_attn"]["q_proj"]["weight"], layers["mlp"]["down_proj"]["weight"]
    after = learner.export_hf()
    layout = {
        "q_proj_shard": list(q.addressable_shards[0].data.shape[1:]),
        "down_proj_shard": list(down.addressable_shards[0].data.shape[1:]),
        "max_update": max(float(np.abs(after[k] - before[k]).max()) for k in after),
    }
    return metrics, after, layout


def main() -> None:
    model_dir = sys.argv[1]
    devices = jax.devices()
    assert len(devices) == 8, devices
    base_metrics, base_params, _ = run(model_dir, {"dp": 1}, devices[:1], micro=4)
    out = {"single": {k: base_metrics[k] for k in ("actor/loss", "actor/grad_norm")}}
    for name, mesh in MESHES.items():
        metrics, params, layout = run(model_dir, mesh, devices, micro=8)
        out[name] = {
            "loss": metrics["actor/loss"],
            "grad_norm": metrics["actor/grad_norm"],
            "max_param_diff": max(float(np.abs(params[k] - base_params[k]).max()) for k in base_params),
            **layout,
        }
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
