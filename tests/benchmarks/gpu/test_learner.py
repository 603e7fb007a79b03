"""The GPU learner benchmark runs end to end on tiny shapes on this CPU, so it cannot rot between GPU sessions: with
the packages the lent GPU machines lack made unimportable (Ray, vLLM, OmegaConf, math-verify, ...), as there."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

from benchmarks.gpu.learner import SHAPES
from relay.repo import REPO_ROOT

# Not on the GPU machines (the device tool's package list): an import of any of them fails there.
ABSENT_THERE = ("ray", "vllm", "omegaconf", "math_verify", "gguf", "trl", "datasets")
BLOCKER = f"""import sys
class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {ABSENT_THERE!r}:
            raise ImportError("not on the GPU machines: " + name)
sys.meta_path.insert(0, _Absent())
"""


def test_every_side_runs_and_the_table_has_its_figures(tmp_path) -> None:
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    cmd = [sys.executable, "-m", "benchmarks.gpu.learner", "--tiny", "--repeats", "1", "--out", str(tmp_path)]
    done = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((tmp_path / "gpu_learner_tiny.json").read_text())
    runs, (row,) = result["runs"]["tiny-qwen2"], result["rows"]
    assert row["jax"]["seconds"] > 0 and row["torch"]["seconds"] > 0 and row["speed_vs_torch"] > 0
    assert row["jax"]["mfu"] > 0 and row["jax"]["estimate_gib"] > 0
    learner = runs["jax"]
    assert learner["attention"].startswith("train.attention: xla (auto on cpu")
    exports = learner["exports"]
    assert exports["bfloat16"]["bytes"] * 2 == exports["float32"]["bytes"]
    # the HF engine in bfloat16 against the bf16 learner on its samples: the presets' bound (tests/test_presets.py)
    assert math.isfinite(learner["logprob_gap_max"]) and learner["logprob_gap_max"] < 0.03
    assert runs["hf"]["sampled_tokens"] > 0
    assert "| tiny-qwen2 |" in done.stdout and "FAILED" not in done.stderr


def test_the_gpu_shapes_are_the_public_configs() -> None:
    """Qwen2.5-3B has 3.09B parameters (tied), Qwen2.5-0.5B 0.49B, SmolLM2-135M 134.5M."""
    from placement.model_shape import ModelShape, count_params

    counts = {m: count_params(ModelShape.from_hf_config(SHAPES[m])) for m in ("smollm2-135m", "qwen2.5-0.5b")}
    counts["qwen2.5-3b"] = count_params(ModelShape.from_hf_config(SHAPES["qwen2.5-3b"]))
    assert abs(counts["qwen2.5-3b"] / 3.086e9 - 1) < 0.005
    assert abs(counts["qwen2.5-0.5b"] / 0.494e9 - 1) < 0.005
    assert abs(counts["smollm2-135m"] / 134.5e6 - 1) < 0.005
