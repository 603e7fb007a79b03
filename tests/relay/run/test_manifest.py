"""manifest.json: config, fingerprints of data and model, git, packages, host, environment without secrets."""

from __future__ import annotations

import importlib.metadata
import json
import platform
import re
from pathlib import Path

from relay.repo import REPO_ROOT
from relay.run.manifest import (
    build_manifest,
    dir_fingerprint,
    env_record,
    file_fingerprint,
    git_info,
    is_secret_name,
    write_manifest,
)
from relay.run.run_dir import create_run_dir, open_run_dir_for_resume

SECRET_ENV = {
    "RELAY_TEST_API_KEY": "sk-plantedsecret123",
    "HF_TOKEN": "hf_planted456",
    "WANDB_API_KEY": "wandbplanted789",
    "OTHER_SERVICE_PASSWORD": "pw-planted000",  # not a relevant prefix: neither name nor value recorded
}
PLAIN_ENV = {
    "RAY_ADDRESS": "auto",
    "JAX_PLATFORMS": "cpu",
    "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
    "STEPS": "7",
    "LEARNING_RATE": "1e-6",
    "WANDB_PROJECT": "relay",
    "HOME": "/home/someone",
    "PATH": "/usr/bin",
}


def _model_dir(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text('{"model_type": "llama"}')
    (root / "tokenizer.json").write_text('{"version": "1.0"}')
    (root / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    (root / ".cache").mkdir()
    (root / ".cache" / "download.metadata").write_text("etag and a timestamp")
    return root


def _manifest(tmp_path: Path, environ: dict[str, str], **overrides) -> dict:
    data = tmp_path / "train.jsonl"
    if not data.exists():
        data.write_text('{"question": "1+1?", "answer": "#### 2"}\n')
    model = tmp_path / "model"
    if not model.exists():
        _model_dir(model)
    kwargs = dict(
        config={"trainer": {"run_name": "r", "seed": 3}, "model": {"path": str(model)}},
        derived={"local_batch": 16},
        seed=3,
        data=[file_fingerprint(data)],
        model_dir=model,
        repo_dir=REPO_ROOT,
        cluster={"nodes": [{"node_id": "n0", "CPU": 2.0, "GPU": 0.0, "memory_gib": 7.5}]},
        environ=environ,
    )
    kwargs.update(overrides)
    return build_manifest(**kwargs)


def test_contents(tmp_path: Path) -> None:
    m = _manifest(tmp_path, {**PLAIN_ENV})
    assert m["config"]["trainer"] == {"run_name": "r", "seed": 3}
    assert m["derived"] == {"local_batch": 16} and m["seed"] == 3
    assert m["cluster"]["nodes"][0]["CPU"] == 2.0
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", m["started_at"])

    (data,) = m["data"]
    raw = (tmp_path / "train.jsonl").read_bytes()
    assert data["size"] == len(raw) and re.fullmatch(r"[0-9a-f]{64}", data["sha256"])

    model = m["model"]
    assert [f["path"] for f in model["files"]] == ["config.json", "model.safetensors", "tokenizer.json"]
    assert model["total_bytes"] == sum(f["size"] for f in model["files"]) and re.fullmatch(
        r"[0-9a-f]{64}", model["sha256"]
    )

    assert m["packages"]["numpy"] == importlib.metadata.version("numpy")
    assert m["packages"]["omegaconf"] == importlib.metadata.version("omegaconf")
    assert set(m["packages"]) >= {
        "jax",
        "jaxlib",
        "flax",
        "optax",
        "torch",
        "transformers",
        "vllm",
        "ray",
        "math-verify",
    }
    assert m["host"]["python"] == platform.python_version()
    assert m["host"]["cpu_count"] >= 1 and m["host"]["memory_total_bytes"] > 0 and m["host"]["hostname"]

    env = m["env"]["vars"]
    assert env["RAY_ADDRESS"] == "auto" and env["STEPS"] == "7" and env["LEARNING_RATE"] == "1e-6"
    assert env["XLA_FLAGS"].startswith("--xla") and env["WANDB_PROJECT"] == "relay"
    assert "HOME" not in env and "PATH" not in env


def test_git_info_in_this_repo_and_outside(tmp_path: Path) -> None:
    info = git_info(REPO_ROOT)
    assert re.fullmatch(r"[0-9a-f]{40}", info["commit"])
    assert isinstance(info["dirty"], bool) and info["dirty_files_count"] >= len(info["dirty_files"])
    outside = git_info(tmp_path)
    assert outside["commit"] == "unknown" and outside["dirty"] == "unknown" and outside["error"]
    assert git_info(tmp_path / "missing")["commit"] == "unknown"


def test_fingerprints_follow_content(tmp_path: Path) -> None:
    before = _manifest(tmp_path, {})
    assert _manifest(tmp_path, {})["model"]["sha256"] == before["model"]["sha256"]  # deterministic

    (tmp_path / "train.jsonl").write_text('{"question": "1+2?", "answer": "#### 3"}\n')  # same size
    (tmp_path / "model" / "model.safetensors").write_bytes(bytes(range(256)) * 63 + bytes(reversed(range(256))))
    after = _manifest(tmp_path, {})
    assert after["data"][0]["size"] == before["data"][0]["size"]
    assert after["data"][0]["sha256"] != before["data"][0]["sha256"]
    assert after["model"]["sha256"] != before["model"]["sha256"]

    # The same files elsewhere give the same fingerprint; hidden download metadata does not count.
    copy = _model_dir(tmp_path / "copy")
    (copy / ".cache" / "download.metadata").write_text("another timestamp")
    (copy / "model.safetensors").write_bytes((tmp_path / "model" / "model.safetensors").read_bytes())
    assert dir_fingerprint(copy)["sha256"] == after["model"]["sha256"]
    # A renamed file changes it.
    (copy / "tokenizer.json").rename(copy / "tokenizer2.json")
    assert dir_fingerprint(copy)["sha256"] != after["model"]["sha256"]


def test_missing_files_do_not_crash(tmp_path: Path) -> None:
    m = _manifest(tmp_path, {}, data=[file_fingerprint(tmp_path / "nope.jsonl")], model_dir=tmp_path / "no-model")
    assert "error" in m["data"][0] and m["model"]["error"] == "not a directory"


def test_secrets_are_recorded_by_name_only(tmp_path: Path) -> None:
    environ = {**PLAIN_ENV, **SECRET_ENV}
    # A secret value that also leaks into the config or another variable is masked there too.
    config_leak = {"trainer": {"note": "token hf_planted456 here"}}
    environ["HF_ENDPOINT"] = "https://user:sk-plantedsecret123@hf.example"
    run_dir = create_run_dir(tmp_path / "outputs", "secret-run", explicit=True)
    manifest = _manifest(tmp_path, environ, config=config_leak)
    write_manifest(run_dir, manifest)

    assert manifest["env"]["secret_env_names"] == ["HF_TOKEN", "RELAY_TEST_API_KEY", "WANDB_API_KEY"]
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert files == [run_dir / "manifest.json"]  # no temp file left behind
    for path in files:
        text = path.read_text()
        for value in SECRET_ENV.values():
            assert value not in text, f"{value} leaked into {path}"
        for name in ("RELAY_TEST_API_KEY", "HF_TOKEN", "WANDB_API_KEY"):
            assert name in text
        assert "OTHER_SERVICE_PASSWORD" not in text
    written = json.loads((run_dir / "manifest.json").read_text())
    assert written["config"]["trainer"]["note"] == "token <redacted> here"
    assert written["env"]["vars"]["HF_ENDPOINT"] == "https://user:<redacted>@hf.example"
    assert open_run_dir_for_resume(run_dir) == run_dir


def test_env_record_split() -> None:
    environ = {
        "HF_TOKEN": "a-value-1",
        "RAY_REDIS_PASSWORD": "a-value-2",
        "VLLM_API_KEY": "a-value-3",
        "TPU_SECRET_thing": "a-value-4",
        "JAX_PLATFORMS": "cpu",
        "RELAY_HOME": "/cache",
        "BETA": "0.01",
        "EDITOR": "vi",
    }
    record = env_record(environ)
    assert record == {
        "vars": {"BETA": "0.01", "JAX_PLATFORMS": "cpu", "RELAY_HOME": "/cache"},
        "secret_env_names": ["HF_TOKEN", "RAY_REDIS_PASSWORD", "TPU_SECRET_thing", "VLLM_API_KEY"],
    }
    assert is_secret_name("hf_token") and is_secret_name("my_api_key") and not is_secret_name("RAY_ADDRESS")


def test_write_manifest_replaces_atomically(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"a": 1})
    write_manifest(tmp_path, {"a": 2, "nan": float("nan")})
    assert json.loads((tmp_path / "manifest.json").read_text()) == {"a": 2, "nan": "nan"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]
