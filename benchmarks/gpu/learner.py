"""The learner on a GPU, in one command: no Ray, no vLLM (the lent GPU machines have neither).

    python -m benchmarks.gpu.learner [--models smollm2-135m,qwen2.5-0.5b,qwen2.5-3b] [--repeats 2] [--out DIR]
    python -m benchmarks.gpu.learner --tiny [--models M]   # a small batch on any device (default: a tiny Qwen2)

For each model shape (the real config, random weights written once as bfloat16 safetensors):

1. ``hf``: Relay's transformers engine (:class:`relay.engines.hf_engine.HFRolloutEngine`) in bfloat16 on the same
   device samples ``n`` responses per prompt with their per-token log-probs;
2. ``jax``: Relay's :class:`~relay.learner.learner.JaxLearner` as a GPU preset builds it (remat, bfloat16 compute on
   float32 master weights, AdamW, ``train.attention: auto``, packed rows, ``share_prompts`` off). An update on the
   engine's samples gives the rollout-vs-learner log-prob gap (the update's ``logprob_gap/rollout_vs_learner_*``,
   under the weights the engine sampled with); then timed updates of one GRPO step (16 prompts x 8 samples, prompts
   128-256 and responses 64-512 tokens, ~61k real tokens, rows of 2048 tokens, 8 rows per micro-batch), the device
   allocator's peak beside Relay's estimate of the per-GPU learner line (:mod:`placement.learner_device`), and the
   weight export in float32 and in bfloat16 (what a bfloat16 engine is sent; timed after one untimed bfloat16 export,
   which compiles the cast of each tensor shape once, as a run's first sync does);
3. ``torch``: the torch baseline on the same rows (:mod:`benchmarks.harness.torch_baseline`: float32 weights under
   bfloat16 autocast, gradient checkpointing, SDPA with the same mask, fused AdamW).

MFU is model FLOPs on real tokens (:func:`benchmarks.harness.flops.step_flops`) against a bfloat16 matmul peak measured
in the same run (8192^3 in JAX). Every side runs in its own process: each peak is that side's alone, and a side that
fails is a row with its error, not a lost run. Writes ``gpu_learner.json`` into ``--out`` (default
``benchmarks/results``) and prints one Markdown table (:mod:`benchmarks.gpu.learner_report`). The random weights
make near-uniform distributions, so the log-prob gap measures the two engines' arithmetic, not a trained model's.

On a lent GPU machine: ``PYTHONUNBUFFERED=1 python -m benchmarks.gpu.learner --out $OUT`` (the JSON comes back).
Expected to take about 5 minutes on one H100/H200, an estimate from the step, compile and export times of the
hand-driven H200 run in BENCHMARKS.md, not yet measured; ``--models`` drops a shape where time is short.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.gpu.learner_report import errors_of, markdown_table, summarise
from relay.metrics import policy as pm
from relay.repo import REPO_ROOT

SHAPES: dict[str, dict[str, Any]] = {
    "smollm2-135m": {"model_type": "llama", "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
                     "num_attention_heads": 9, "num_key_value_heads": 3, "vocab_size": 49152,
                     "tie_word_embeddings": True, "rope_theta": 100000.0, "rms_norm_eps": 1e-5},
    "qwen2.5-0.5b": {"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
                     "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
                     "tie_word_embeddings": True, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6},
    "qwen2.5-3b": {"model_type": "qwen2", "hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
                   "num_attention_heads": 16, "num_key_value_heads": 2, "vocab_size": 151936,
                   "tie_word_embeddings": True, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6},
    "tiny-qwen2": {"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                   "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "vocab_size": 512,
                   "tie_word_embeddings": True, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6},
}  # fmt: skip
GPU_MODELS = ("smollm2-135m", "qwen2.5-0.5b", "qwen2.5-3b")


@dataclass(frozen=True)
class Workload:
    """One GRPO step's batch and the learner's rows; ``gap_*``: the engine's sampling for the log-prob gap."""

    prompts: int
    n: int
    prompt_range: tuple[int, int]
    response_range: tuple[int, int]
    width: int
    micro_rows: int
    gap_prompts: int
    gap_prompt_length: int
    gap_new_tokens: int
    matmul: int  # the side of the peak's square matmul


FULL = Workload(16, 8, (128, 256), (64, 512), 2048, 8, 4, 64, 128, 8192)
TINY = Workload(2, 4, (8, 16), (4, 16), 64, 2, 2, 8, 8, 256)


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def write_checkpoint(fields: dict[str, Any], out: Path) -> dict[str, Any]:
    """A random-weight model of ``fields`` saved as bfloat16 safetensors in ``out`` (built on the GPU when there is
    one: seconds for 3B parameters)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    config = AutoConfig.for_model(**fields, max_position_embeddings=4096)
    with torch.device(_device()):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(out)
    return {"params": sum(p.numel() for p in model.parameters())}


def sample_with_hf(ckpt: str, fields: dict, w: Workload, out: Path) -> dict[str, Any]:
    """The HF engine in bfloat16 samples ``n`` responses for random prompts; saved to ``out`` (npz) for the learner."""
    from relay.engines.base import SamplingSettings
    from relay.engines.hf_engine import HFRolloutEngine

    rng = np.random.default_rng(1)
    prompts = rng.integers(3, fields["vocab_size"], (w.gap_prompts, w.gap_prompt_length)).tolist()
    engine = HFRolloutEngine(ckpt, eos_token_ids=[2], pad_token_id=0, device=_device(), dtype="bfloat16")
    start = time.perf_counter()
    groups = engine.generate(prompts, SamplingSettings(n=w.n, max_new_tokens=w.gap_new_tokens, seed=0))
    seconds = time.perf_counter() - start
    generations = [g for group in groups for g in group]
    tokens = np.zeros((len(generations), w.gap_new_tokens), np.int32)
    log_probs = np.zeros(tokens.shape, np.float32)
    lengths = np.array([len(g.token_ids) for g in generations], np.int32)
    for i, g in enumerate(generations):
        tokens[i, : lengths[i]], log_probs[i, : lengths[i]] = g.token_ids, g.log_probs
    np.savez(out, prompts=np.repeat(np.asarray(prompts, np.int32), w.n, 0), tokens=tokens, log_probs=log_probs,
             lengths=lengths)  # fmt: skip
    return {"generate_seconds": seconds, "sampled_tokens": int(lengths.sum())}


def gap_batch(samples: Path) -> tuple[dict[str, np.ndarray], int]:
    """The engine's samples as a learner batch whose rollout, old and reference log-probs are the engine's (zero
    advantages: the gap needs only the learner's log-probs)."""
    s = np.load(samples)
    rows, prompt = s["prompts"].shape
    response_mask = (np.arange(s["tokens"].shape[1])[None] < s["lengths"][:, None]).astype(np.float32)
    mask = np.concatenate([np.ones((rows, prompt), np.int32), response_mask.astype(np.int32)], 1)
    engine_log_probs = s["log_probs"] * response_mask
    return {
        "input_ids": np.concatenate([s["prompts"], s["tokens"]], 1),
        "attention_mask": mask,
        "position_ids": np.clip(np.cumsum(mask, 1) - 1, 0, None).astype(np.int32),
        "response_mask": response_mask,
        "advantages": np.zeros_like(response_mask),
        "rollout_log_probs": engine_log_probs,
        "ref_log_probs": engine_log_probs.copy(),
        "old_log_probs": engine_log_probs.copy(),
    }, prompt


def _peak_bytes() -> tuple[float, str]:
    """The JAX device allocator's peak (GPU), else this process's peak RSS (CPU)."""
    import resource

    import jax

    stats = jax.local_devices()[0].memory_stats()
    if stats and "peak_bytes_in_use" in stats:
        return float(stats["peak_bytes_in_use"]), "device peak_bytes_in_use"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0, "process peak RSS"


def estimate_bytes(fields: dict, w: Workload, implementation: str, device: str) -> float:
    """Relay's per-device learner line for this run's settings (placement.learner_device)."""
    from placement.learner_device import LearnerSettings, LearnerShape, learner_device_bytes
    from placement.model_shape import ModelShape, count_params
    from relay.models.attention_choice import keeps_scores

    shape = ModelShape.from_hf_config(fields)
    params = count_params(shape)
    rows = LearnerShape(w.micro_rows, w.width, w.width, shard=1, tp=1, devices=1)
    settings = LearnerSettings("bfloat16", True, "adamw", params, scores=keeps_scores(implementation), device=device)
    return sum(learner_device_bytes(shape, params, rows, settings).values())


def run_learner(ckpt: str, fields: dict, w: Workload, repeats: int, samples: Path) -> dict[str, Any]:
    """The JAX side: the gap update on the engine's samples, timed updates, the peak, the estimate, the exports."""
    import jax

    from benchmarks.harness.synthetic import adamw_section, grpo_batch
    from relay.learner.grpo_loss import LossSettings
    from relay.learner.learner import JaxLearner
    from relay.models.attention_choice import choose_attention

    backend = jax.default_backend()
    choice = choose_attention("auto", backend, "bfloat16")
    loss = LossSettings(0.2, 0.2, 0.001, "low_var_kl", 1.0, old_from_batch=False)
    learner = JaxLearner(ckpt, adamw_section(1e-6), loss, w.micro_rows, remat=True, compute_dtype="bfloat16",
                         attention=choice.implementation, pack_width=w.width, share_prompts=False)  # fmt: skip
    gap = learner.update(*gap_batch(samples))  # first: the weights the engine sampled with
    batch, prompt = grpo_batch(w.prompts, w.n, w.prompt_range, w.response_range, fields["vocab_size"])
    first = learner.update(batch, prompt)  # compiles this shape
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        learner.update(batch, prompt)
        seconds.append(time.perf_counter() - start)
    peak, peak_source = _peak_bytes()
    learner.export_hf("bfloat16")  # compiles the cast of each tensor shape once, as a run's first sync does
    exports = {}
    for dtype in ("float32", "bfloat16"):
        start = time.perf_counter()
        weights = learner.export_hf(dtype)
        exports[dtype] = {"seconds": time.perf_counter() - start, "bytes": sum(v.nbytes for v in weights.values())}
        del weights
    return {
        "attention": choice.message(),
        "backend": backend,
        "seconds": seconds,
        "compile_seconds": first[pm.LEARNER_COMPILE_SECONDS],
        "peak_bytes": peak,
        "peak_source": peak_source,
        "estimate_bytes": estimate_bytes(fields, w, choice.implementation, "gpu" if backend == "gpu" else "cpu"),
        "exports": exports,
        "logprob_gap_mean": gap[pm.LOGPROB_GAP_ROLLOUT_MEAN],
        "logprob_gap_max": gap[pm.LOGPROB_GAP_ROLLOUT_MAX],
        **_step_work(batch, fields),
    }


def _step_work(batch: dict[str, np.ndarray], fields: dict) -> dict[str, float]:
    from benchmarks.harness.flops import step_flops

    flops = step_flops(fields, batch["attention_mask"].sum(1), batch["response_mask"].sum())
    return {"real_tokens": float(batch["attention_mask"].sum()), "flops": flops}


def run_torch(ckpt: str, fields: dict, w: Workload, repeats: int) -> dict[str, Any]:
    """The torch baseline on the same batch and rows."""
    import resource

    from benchmarks.harness.synthetic import grpo_batch
    from benchmarks.harness.torch_baseline import TorchSettings, torch_grpo_steps

    device = _device()
    settings = TorchSettings(device, autocast="bfloat16", checkpointing=True, fused_adamw=device == "cuda")
    batch, prompt = grpo_batch(w.prompts, w.n, w.prompt_range, w.response_range, fields["vocab_size"])
    out = torch_grpo_steps(ckpt, batch, prompt, w.micro_rows, repeats, w.width, settings)
    if "peak_bytes" not in out:
        out["peak_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0
    return {**out, **_step_work(batch, fields)}


def matmul_peak(n: int) -> dict[str, Any]:
    """Best-of-5 TFLOP/s of a bfloat16 ``n x n @ n x n`` matmul in JAX on the default device."""
    import jax
    import jax.numpy as jnp

    x = jax.random.normal(jax.random.PRNGKey(0), (n, n), jnp.bfloat16)
    f = jax.jit(jnp.matmul)
    f(x, x).block_until_ready()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        f(x, x).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return {"tflops": 2 * n**3 / best / 1e12, "n": n, "device": str(jax.devices()[0].device_kind)}


def child(side: str, model: str, w: Workload, repeats: int, work: Path) -> dict[str, Any]:
    """One side in this process (the parent starts one process per side)."""
    fields, ckpt = SHAPES[model], str(work / model)
    if side == "peak":
        return matmul_peak(w.matmul)
    if side == "checkpoint":
        return write_checkpoint(fields, Path(ckpt))
    if side == "hf":
        return sample_with_hf(ckpt, fields, w, work / f"{model}-samples.npz")
    if side == "jax":
        return run_learner(ckpt, fields, w, repeats, work / f"{model}-samples.npz")
    return run_torch(ckpt, fields, w, repeats)


def run_side(side: str, model: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """``side`` of ``model`` in a fresh process: its result, or ``{"error": ...}`` with the end of its output."""
    result = work / f"{model}-{side}.json"
    cmd = [sys.executable, "-m", "benchmarks.gpu.learner", "--child", side, "--models", model, "--work", str(work)]
    cmd += ["--repeats", str(args.repeats), *(["--tiny"] if args.tiny else [])]
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false", "PYTHONPATH": path}
    if args.tiny:  # the CPU check: XLA-CPU as the learner role runs it
        from relay.learner.xla_cpu import cpu_xla_flags

        env.update(JAX_PLATFORMS="cpu", XLA_FLAGS=cpu_xla_flags())
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout, cwd=REPO_ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout} s", "wall_seconds": args.timeout}
    if done.returncode != 0 or not result.is_file():
        return {"error": (done.stderr or done.stdout)[-2000:], "wall_seconds": time.perf_counter() - start}
    return {**json.loads(result.read_text()), "wall_seconds": time.perf_counter() - start}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = f"default: {', '.join(GPU_MODELS)}; with --tiny: tiny-qwen2"
    parser.add_argument("--models", help=f"comma-separated, of {', '.join(SHAPES)} ({defaults})")
    parser.add_argument("--repeats", type=int, default=2, help="timed steps per side (after a warm-up)")
    parser.add_argument("--tiny", action="store_true", help="the CPU check: a small batch (and tiny-qwen2)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per side")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    workload = TINY if args.tiny else FULL
    models = (args.models or ("tiny-qwen2" if args.tiny else ",".join(GPU_MODELS))).split(",")
    unknown = sorted(set(models) - set(SHAPES))
    if unknown:
        parser.error(f"--models {','.join(unknown)}: unknown; choose from {', '.join(SHAPES)}")
    if args.child:
        result = child(args.child, models[0], workload, args.repeats, args.work)
        (args.work / f"{models[0]}-{args.child}.json").write_text(json.dumps(result))
        return 0
    return run_all(models, args, workload)


def run_all(models: list[str], args: argparse.Namespace, workload: Workload) -> int:
    """Every side of every model in its own process; the table, the JSON and the errors. Exit 1 if any side failed."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="relay-gpu-learner-") as tmp:
        work = Path(tmp)
        peak = run_side("peak", models[0], args, work)
        print(f"bf16 matmul peak: {peak.get('tflops', 0):.0f} TFLOP/s on {peak.get('device')}", flush=True)
        runs: dict[str, dict[str, dict]] = {}
        for model in models:
            runs[model] = {side: run_side(side, model, args, work) for side in ("checkpoint", "hf", "jax", "torch")}
            walls = ", ".join(f"{side} {r['wall_seconds']:.0f} s" for side, r in runs[model].items())
            print(f"{model}: {walls}", flush=True)
    rows = [summarise(m, runs[m], peak.get("tflops")) for m in models]
    table = markdown_table(rows, runs)
    result = {"date": time.strftime("%Y-%m-%d"), "workload": asdict(workload), "peak": peak, "runs": runs,
              "rows": rows, "table": table, "wall_seconds": time.perf_counter() - start}  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    name = "gpu_learner_tiny.json" if args.tiny else "gpu_learner.json"  # a small batch: a check, not the figures
    (args.out / name).write_text(json.dumps(result, indent=2))
    print(table)
    for line in errors_of(runs):
        print(f"FAILED {line}", file=sys.stderr)
    print(f"{time.perf_counter() - start:.0f} s; results: {args.out / name}")
    return 1 if errors_of(runs) else 0


if __name__ == "__main__":
    sys.exit(main())
