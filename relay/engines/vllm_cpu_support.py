"""What vLLM-CPU's attention can serve, checked before any role starts.

vLLM 0.32's CPU attention backend serves a fixed list of head sizes (``CPUAttentionBackend.get_supported_head_sizes``
in ``vllm/v1/attention/backends/cpu_attn.py``); a model with another ``head_dim`` passes every other check, starts
the roles and fails inside the rollout actor with ``RuntimeError: Unsupported CPU attention configuration``.
:func:`vllm_cpu_problems` finds that in the config instead (``tests/relay/engines/test_vllm_cpu_support.py``
compares :data:`CPU_HEAD_SIZES` with the installed vLLM's list).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)


def head_dim(model_dir: Path) -> int:
    """The attention head size of the checkpoint in ``model_dir``: its ``config.json``'s ``head_dim``, else
    ``hidden_size / num_attention_heads`` (any family: a solver need not be one the learner implements)."""
    config = json.loads((Path(model_dir) / "config.json").read_text())
    return int(config.get("head_dim") or int(config["hidden_size"]) // int(config["num_attention_heads"]))


def vllm_cpu_problems(cfg: Any, model_dir: Path, solver_dir: Path | None = None) -> list[str]:
    """A problem for each vLLM engine this run starts on the CPU whose model's head size vLLM-CPU cannot serve:
    the rollout (``rollout.engine=vllm`` with ``rollout.gpus_per_replica=0``) and a solver (``reward.mode=solver``
    with ``reward.solver_engine=vllm`` and ``reward.gpus=0``), each naming the key, the head size and the fix."""
    engines = []
    if cfg.rollout.engine == "vllm" and cfg.rollout.gpus_per_replica == 0:
        engines.append(("rollout.engine", "model.path", model_dir))
    if cfg.reward.mode == "solver" and cfg.reward.solver_engine == "vllm" and cfg.reward.gpus == 0:
        engines.append(("reward.solver_engine", "reward.solver_model", solver_dir or model_dir))
    problems = []
    for engine_key, model_key, path in engines:
        size = head_dim(path)
        if size not in CPU_HEAD_SIZES:
            problems.append(
                f"{engine_key}=vllm on the CPU cannot serve {model_key}={str(path)!r}: its head_dim is {size}, and "
                f"vLLM-CPU's attention serves head sizes {list(CPU_HEAD_SIZES)}; set {engine_key}=hf "
                "(transformers) or use a model whose head_dim is one of them"
            )
    return problems
