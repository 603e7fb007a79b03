"""An engine's sampled log-probs against transformers' rescoring of the same tokens: the check every engine test
makes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM

from relay.engines.torch_logprobs import load_named_tensors, response_log_probs


def rescored(model_dir: Path | str, arrays: dict, temperature: float, weights: dict | None = None) -> np.ndarray:
    """transformers' log-probs of ``arrays``' response tokens under the checkpoint at ``model_dir`` (with ``weights``
    loaded over it when given), at the sampling ``temperature``."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    if weights is not None:
        load_named_tensors(model, weights)
    return response_log_probs(
        model,
        arrays["input_ids"],
        arrays["attention_mask"],
        arrays["position_ids"],
        arrays["prompts"].shape[1],
        temperature=temperature,
    )


def rescored_gap(model_dir: Path | str, arrays: dict, temperature: float, weights: dict | None = None) -> np.ndarray:
    """|engine - transformers| per response token (:func:`rescored`)."""
    gap = np.abs(rescored(model_dir, arrays, temperature, weights) - arrays["rollout_log_probs"])
    return gap[arrays["response_mask"].astype(bool)]
