"""Every learner configuration a preset can reach runs an update on this CPU, and its log-probs match the float32
reference: attention implementation x compute dtype x full/LoRA x packed/shared-prompt rows, on a tiny Llama and a
tiny Qwen2 (q/k/v biases), with ``remat`` as the GPU presets set it.

The reference is the float32 forward with Relay's ``xla`` attention on the padded batch
(:func:`relay.models.jax_logprobs.response_log_probs`); the batch carries it as its rollout log-probs, so the update's
own ``logprob_gap/rollout_vs_learner_max`` is the largest gap of the learner's log-probs (the first epoch's, before
its optimizer step) from the reference. LoRA adapters start at ``B = 0``, so their log-probs are the base's.

Tolerances (the largest gaps over the matrix on an AMD EPYC CPU: float32 9.5e-7, bfloat16 0.0029, on log-probs
near -10.8, the tiny models' ~log(1/49152)): float32 within 1e-4, bfloat16 within 0.03, the bound
``tests/test_presets.py`` puts on a bfloat16 engine against a bfloat16 learner.

cuDNN (``attention: cudnn``) has no CPU kernel: its call is :func:`relay.models.attention.library_attention` with
``implementation="cudnn"``, the same arguments as ``dot_product_attention``'s ``"xla"`` run here.
"""

from __future__ import annotations

import itertools
import math

import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks.harness.synthetic import adamw_section, synthetic_batch
from relay.learner.grpo_loss import LossSettings
from relay.learner.learner import JaxLearner
from relay.models.hf_params import load_hf_checkpoint
from relay.models.jax_logprobs import response_log_probs
from relay.models.layer_stack import stack_layers
from relay.models.llama_config import LlamaConfig
from relay.models.llama_flax import LlamaForCausalLM
from relay.models.lora_spec import LoraSpec

P, R, ROWS, GROUP = 8, 8, 8, 4
TOLERANCE = {"float32": 1e-4, "bfloat16": 0.03}
LORA = LoraSpec(4, 8.0, ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"))
MODELS = ("tiny_model_dir", "tiny_qwen2_float32_dir")
CASES = list(itertools.product(("xla", "dot_product_attention"), ("float32", "bfloat16"), (False, True), (False, True)))


@pytest.fixture(scope="module", params=MODELS)
def model_and_reference(request) -> tuple[str, dict[str, np.ndarray]]:
    """A tiny model's directory and a batch whose rollout log-probs are its float32 ``xla`` log-probs."""
    model_dir = str(request.getfixturevalue(request.param))
    config = LlamaConfig.from_pretrained(model_dir)
    params = stack_layers(load_hf_checkpoint(model_dir, config), config.num_hidden_layers)
    batch = synthetic_batch(ROWS, P, R, vocab=config.vocab_size, seed=3, group=GROUP)
    model = LlamaForCausalLM(config, scan_layers=True)
    reference, _ = response_log_probs(
        model, params, *(jnp.asarray(batch[k]) for k in ("input_ids", "attention_mask", "position_ids")), P
    )
    batch["rollout_log_probs"] = np.asarray(reference, np.float32)
    return model_dir, batch


@pytest.mark.parametrize(
    ("attention", "dtype", "lora", "shared"),
    CASES,
    ids=[f"{a}-{d}-{'lora' if lo else 'full'}-{'shared' if s else 'packed'}" for a, d, lo, s in CASES],
)
def test_update_runs_and_matches_the_float32_reference(model_and_reference, attention, dtype, lora, shared) -> None:
    model_dir, batch = model_and_reference
    loss = LossSettings(0.2, 0.2, 0.001, "low_var_kl", 1.0, old_from_batch=False)
    learner = JaxLearner(
        model_dir,
        adamw_section(1e-4),
        loss,
        4,
        remat=True,
        compute_dtype=dtype,
        attention=attention,
        pack_width=64,
        share_prompts=shared,
        lora=LORA if lora else None,
    )
    metrics = learner.update(batch, P)
    assert math.isfinite(metrics["actor/loss"]) and metrics["learner/skipped_steps"] == 0
    assert metrics["logprob_gap/rollout_vs_learner_max"] < TOLERANCE[dtype], metrics
    if shared:
        assert metrics["batch/shared_prompt_share"] > 0, metrics
