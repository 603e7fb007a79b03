"""The gradients of a batch's loss under a learner's current weights, with no optimizer step: what the learner tests
compare across micro-batch sizes, row layouts, LoRA and the reference source. It compiles the accumulation loop the
learner's step runs (:func:`relay.learner.train_step.make_accumulate`), on the learner's own rows and weights."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from relay.learner.learner import JaxLearner
from relay.learner.reference_pass import step_settings
from relay.learner.row_batches import loss_inputs
from relay.learner.train_step import make_accumulate


def learner_gradients(
    learner: JaxLearner, batch: Mapping[str, np.ndarray], prompt_length: int
) -> tuple[Any, dict[str, float], np.ndarray]:
    """``(gradients, summed metrics, this process's log-probs [B, R])`` of ``batch``; params unchanged."""
    slot_keys = loss_inputs(batch, learner.loss_settings, learner.micro_batch_size)
    global_batch, layout = learner.rows.to_global(batch, prompt_length, slot_keys)
    global_batch = learner._with_reference(global_batch)
    settings = step_settings(learner.loss_settings)
    accumulate = jax.jit(make_accumulate(learner.model, settings, learner.compute_dtype, learner.layerwise))
    grads, sums, log_probs = accumulate(learner.trainable, global_batch, learner._dropout_key(), learner._frozen())
    return grads, {k: float(v) for k, v in sums.items()}, learner.rows.to_local(log_probs, layout)
