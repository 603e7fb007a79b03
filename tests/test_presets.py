"""Every preset in configs/ runs end to end on this machine, with a tiny random model of its own model's family and
on-disk layout and its devices mapped to the CPU by ``placement.on_cpu``.

The Qwen2.5 presets get a tied tiny Qwen2 saved as Qwen2.5 ships (bfloat16, two safetensors shards and an index);
the SmolLM2 ones a tied float32 tiny Llama. Each run keeps the preset's layout (roles, replicas, colocation, learner
devices and mesh, batch arithmetic, algorithm) and shrinks only the sequence lengths: placement, the vLLM rollout,
the reference, the reward, two learner updates with their weight syncs, a checkpoint and its HF export, which
transformers and vLLM then load. A preset whose learner spans two hosts runs on a two-node Ray cluster started
here (``ray start``, :mod:`benchmarks.ray_head`), one learner process per node.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from placement.memory_coefficients import DTYPE_BYTES
from relay.config import load_config
from relay.repo import CONFIGS_DIR

# preset -> (the tiny model's fixture, the overrides that shorten its sequences, why it is slow or None)
PRESETS: dict[str, tuple[str, tuple[str, ...], str | None]] = {
    "default.yaml": ("tiny_model_dir", ("data.max_response_length=16",), None),
    "tiny.yaml": ("tiny_model_dir", (), None),
    "gsm8k_smollm2_learn.yaml": ("tiny_model_dir", ("data.max_response_length=32",), None),
    "gsm8k_smollm2_learn_lora.yaml": ("tiny_model_dir", ("data.max_response_length=32",), None),
    "gsm8k_smollm2_solver.yaml": (
        "tiny_model_dir",
        ("data.max_response_length=16", "reward.solver_max_new_tokens=16", "reward.solver_kv_cache_gib=0.1"),
        None,
    ),
    "gsm8k_smollm2_tools.yaml": (
        "tiny_model_dir",
        ("data.max_response_length=64", "reward.overlong_buffer.length=16"),
        None,
    ),
    "gsm8k_qwen25_3b_4gpu.yaml": (
        "tiny_sharded_qwen2_dir",
        ("data.max_prompt_length=256", "data.max_response_length=16"),
        None,
    ),
    "gsm8k_qwen25_3b_bs128_steps100.yaml": (
        "tiny_sharded_qwen2_dir",
        ("data.max_prompt_length=256", "data.max_response_length=16"),
        None,
    ),
}
# A learner on two hosts needs two nodes (its placement group is STRICT_SPREAD): run on a two-node cluster.
NEEDS_TWO_NODES = {
    "gsm8k_qwen25_7b_tpu_2host.yaml": (
        "tiny_sharded_qwen2_dir",
        ("data.max_prompt_length=256", "data.max_response_length=16"),
    ),
}


def test_every_preset_is_run_here() -> None:
    presets = sorted(p.name for p in CONFIGS_DIR.glob("*.yaml"))
    assert presets == sorted([*PRESETS, *NEEDS_TWO_NODES])


def _overrides(model_dir: Path, out: Path, shorter: tuple[str, ...]) -> list[str]:
    return [
        "placement.on_cpu=true",
        f"model.path={model_dir}",
        *shorter,
        "trainer.total_training_steps=2",
        "trainer.time_budget_minutes=null",
        "trainer.save_freq=2",
        "trainer.keep_checkpoints=1",
        "trainer.export_hf=true",
        "trainer.test_freq=-1",
        f"trainer.output_dir={out}",
        "trainer.run_name=preset",
    ]


# The 4-GPU preset's run is also read by the vLLM test below: both on one test worker, the run made once.
QWEN_4GPU = "gsm8k_qwen25_3b_4gpu.yaml"
QWEN_4GPU_RUN = pytest.mark.xdist_group("qwen-4gpu-run")


def _marks(name: str, why: str | None) -> list[pytest.MarkDecorator]:
    return [*([pytest.mark.slow] if why else []), *([QWEN_4GPU_RUN] if name == QWEN_4GPU else [])]


@pytest.fixture(scope="module")
def preset_run(request, ray_session, tmp_path_factory):
    """``preset_run(name)``: the preset's two-step run on its tiny model, ``(loaded, model_dir, run_dir)``, made once
    per module for every test that reads it."""
    from trainer import train

    runs: dict[str, tuple] = {}

    def run(preset: str) -> tuple:
        if preset not in runs:
            fixture, shorter, _ = PRESETS[preset]
            model_dir = request.getfixturevalue(fixture)
            out = tmp_path_factory.mktemp(preset.removesuffix(".yaml"))
            loaded = load_config(CONFIGS_DIR / preset, _overrides(model_dir, out, shorter), environ={})
            assert train(loaded, model_dir, out / "preset") == 0
            runs[preset] = (loaded, model_dir, out / "preset")
        return runs[preset]

    return run


@pytest.mark.parametrize(
    "preset", [pytest.param(name, marks=_marks(name, why)) for name, (_, _, why) in PRESETS.items()]
)
def test_the_preset_runs_two_steps_on_the_cpu(preset: str, preset_run) -> None:
    loaded, model_dir, run_dir = preset_run(preset)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]
    # Full fine-tuning syncs every weight in derived.weight_sync_dtype (the 16-bit presets: half the bytes).
    sync_bytes = None if loaded.cfg.model.lora else _numel(model_dir) * DTYPE_BYTES[loaded.derived.weight_sync_dtype]
    for row in rows:
        assert math.isfinite(row["actor/loss"]) and row["sync/bytes"] > 0, row
        assert sync_bytes is None or row["sync/bytes"] == sync_bytes, (row["sync/bytes"], sync_bytes)
        assert row["logprob_gap/rollout_vs_learner_max"] < _gap_bound(loaded.cfg), row
    export = run_dir / "checkpoints" / "step_000002" / "hf"
    _loads_in_transformers(export, lora=loaded.cfg.model.lora is not None)


def _numel(model_dir: Path) -> int:
    """The checkpoint's parameter count (a tied head is not stored)."""
    from safetensors import safe_open

    total = 0
    for path in Path(model_dir).glob("*.safetensors"):
        with safe_open(str(path), "np") as f:
            total += sum(math.prod(f.get_slice(name).get_shape()) for name in f.keys())  # noqa: SIM118
    return total


def _gap_bound(cfg) -> float:
    """The largest rollout-vs-learner log-prob gap a run with the learner's weights in the engine may show.

    Both in float32 the two differ by rounding only (bound 1e-3); a bfloat16 engine and learner round every
    activation to 8 bits of mantissa (measured on the tiny bf16 Qwen2 of the GPU presets: max 0.0039, mean 7.4e-4,
    bound 0.03).
    """
    float32 = cfg.rollout.dtype == "float32" and cfg.train.compute_dtype == "float32"
    return 1e-3 if float32 else 0.03


def _loads_in_transformers(export: Path, lora: bool) -> None:
    """The checkpoint's HF export (a PEFT adapter for a LoRA run, merged the way ``driver.evaluate`` does)
    loads in transformers and scores a token."""
    import torch
    from transformers import AutoModelForCausalLM

    model_dir = export
    if lora:
        from relay.checkpoint.peft_export import merge_adapter_dir

        model_dir = merge_adapter_dir(export)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    with torch.no_grad():
        logits = model(torch.tensor([[1, 2, 3]])).logits
    assert torch.isfinite(logits).all()


@QWEN_4GPU_RUN
def test_a_qwen_presets_export_loads_in_vllm(preset_run) -> None:
    """The 4-GPU preset's HF export (of a sharded bf16 tied Qwen2: the preset run's final checkpoint) is served by
    vLLM, with log-probs equal to transformers' on the same tokens."""
    _, _, run_dir = preset_run(QWEN_4GPU)
    assert _vllm_vs_transformers_gap(run_dir / "checkpoints" / "step_000002" / "hf") < 1e-3


def _vllm_vs_transformers_gap(model_dir: Path) -> float:
    """The largest |vLLM - transformers| log-prob over 8 sampled tokens of one prompt."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from relay.engines.base import SamplingSettings
    from relay.engines.vllm_engine import VLLMRolloutEngine

    eos = AutoTokenizer.from_pretrained(str(model_dir)).eos_token_id
    engine = VLLMRolloutEngine(str(model_dir), [eos], max_model_len=256, gpu_memory_utilization=0.3, kv_cache_gib=0.05)
    prompt = [1, 2, 3, 4]
    (sample,) = engine.generate([prompt], SamplingSettings(n=1, max_new_tokens=8, seed=0))[0]
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    with torch.no_grad():
        logits = model(torch.tensor([prompt + sample.token_ids])).logits[0, len(prompt) - 1 : -1].float()
    tokens = torch.tensor(sample.token_ids)[:, None]
    reference = torch.log_softmax(logits, -1).gather(-1, tokens)[:, 0].numpy()
    return float(np.abs(reference - np.asarray(sample.log_probs)).max())


@pytest.mark.parametrize("preset", list(NEEDS_TWO_NODES))
def test_a_two_host_preset_runs_two_steps_on_two_nodes(preset: str, request, tmp_path) -> None:
    """The 2-host TPU preset on two raylets of this machine (``ray start``): one learner process per node joined in
    one JAX job (gloo on CPU), the other roles beside them; ``python trainer.py`` joins that cluster."""
    import subprocess
    import sys

    from benchmarks.ray_head import isolated_head, worker_node
    from relay.repo import REPO_ROOT

    fixture, shorter = NEEDS_TWO_NODES[preset]
    model_dir = request.getfixturevalue(fixture)
    argv = [sys.executable, "trainer.py", "--config", f"configs/{preset}"]
    for override in _overrides(model_dir, tmp_path, shorter):
        argv += ["--set", override]
    with isolated_head(num_cpus=2) as head, worker_node(head, num_cpus=2):
        done = subprocess.run(argv, cwd=REPO_ROOT, env=head.driver_env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = tmp_path / "preset"
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    (roles,) = [e for e in events if e["event"] == "roles"]
    assert roles["nodes"]["learner-0"] != roles["nodes"]["learner-1"], roles
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]
    loaded = load_config(CONFIGS_DIR / preset, _overrides(model_dir, tmp_path, shorter), environ={})
    # Full fine-tuning syncs every weight in derived.weight_sync_dtype (the 16-bit presets: half the bytes).
    sync_bytes = None if loaded.cfg.model.lora else _numel(model_dir) * DTYPE_BYTES[loaded.derived.weight_sync_dtype]
    for row in rows:
        assert math.isfinite(row["actor/loss"]) and row["sync/bytes"] > 0, row
        assert sync_bytes is None or row["sync/bytes"] == sync_bytes, (row["sync/bytes"], sync_bytes)
        assert row["logprob_gap/rollout_vs_learner_max"] < _gap_bound(loaded.cfg), row
    _loads_in_transformers(run_dir / "checkpoints" / "step_000002" / "hf", lora=False)
