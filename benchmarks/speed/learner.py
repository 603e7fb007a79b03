"""Learner step: the JAX learner vs a torch AdamW step of the same model and batch, in one run.

    python -m benchmarks.speed.learner [--model smollm2-135m|tiny] [--rows 16] [--prompt 128] [--response 256]
        [--micro 4] [--torch-micro M] [--repeats 3] [--threads 0] [--group 4]

Both sides do the same GRPO work per step on the same packed batch (``relay.packing.layout_rows``:
whole sequences in rows of ``--pack-width`` tokens, block-diagonal causal attention; ``--pack-width 0``
gives both the padded layout instead; ``--group n``: rows come in groups of ``n`` samples of one prompt and both
sides lay each prompt out once per row, branch-masked): the forward over the rows with the LM head on response slots
only, the clipped policy loss (token-mean) plus a low-variance KL term, the backward, and one AdamW
step, with the rows split into micro-batches of ``--micro`` rows (torch: ``--torch-micro``, default the same;
each side at its own fastest micro-batch is the fair speed comparison) whose gradients accumulate. The JAX
learner runs as the learner role does (``--remat`` recomputes each layer in the backward pass), with
XLA-CPU's memory-aware scheduler (``relay.learner.xla_cpu.cpu_xla_flags``). Also measures this machine's fp32 matmul
peak in JAX and torch (2048^3 matmuls), so model FLOP utilisation is against a peak measured in the same process.
Writes ``benchmarks/results/learner.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from benchmarks.harness.cli import add_int_options
from benchmarks.harness.flops import step_flops
from relay.metrics import policy as pm
from relay.repo import REPO_ROOT

RESULTS = REPO_ROOT / "benchmarks" / "results"


def matmul_peak(backend: str, n: int = 2048, repeats: int = 5) -> float:
    """Best-of-``repeats`` GFLOP/s of an ``n x n @ n x n`` float32 matmul."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
    if backend == "jax":
        import jax
        import jax.numpy as jnp

        f = jax.jit(jnp.matmul)
        x, y = jnp.asarray(a), jnp.asarray(b)
        f(x, y).block_until_ready()
        run = lambda: f(x, y).block_until_ready()  # noqa: E731
    else:
        import torch

        x, y = torch.from_numpy(a), torch.from_numpy(b)
        run = lambda: torch.matmul(x, y)  # noqa: E731
        run()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def time_jax(
    model_dir: str, batch: dict, prompt: int, micro: int, repeats: int, width: int, remat: bool, share: bool = False
) -> dict:
    from benchmarks.harness.synthetic import adamw_section
    from relay.learner.grpo_loss import LossSettings
    from relay.learner.learner import JaxLearner

    loss = LossSettings(0.2, 0.2, 0.001, "low_var_kl", 1.0, old_from_batch=False)
    packing = {"packing": width > 0, "pack_width": width or None, "remat": remat, "share_prompts": share}
    learner = JaxLearner(model_dir, adamw_section(1e-6), loss, micro, **packing)
    first = learner.update(batch, prompt)  # compiles
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        learner.update(batch, prompt)
        seconds.append(time.perf_counter() - start)
    return {"seconds": seconds, "compile_seconds": first[pm.LEARNER_COMPILE_SECONDS]}


def time_torch(
    model_dir: str, batch: dict, prompt: int, micro: int, repeats: int, width: int, share: bool = False
) -> dict:
    """The torch baseline in float32 on the CPU (:mod:`benchmarks.harness.torch_baseline`)."""
    from benchmarks.harness.torch_baseline import TorchSettings, torch_grpo_steps

    return torch_grpo_steps(model_dir, batch, prompt, micro, repeats, width, TorchSettings(), share)


@dataclass(frozen=True)
class UpdateShape:
    """One update's synthetic batch: ``rows`` sequences of ``prompt + response`` tokens, ``group`` samples per
    prompt, in micro-batches of ``micro`` rows (torch's: ``torch_micro``; ``None``: ``micro``)."""

    rows: int
    prompt: int
    response: int
    micro: int
    torch_micro: int | None = None
    group: int = 1


def measure(
    model_dir: str, shape: UpdateShape, repeats: int, threads: int, width: int = 0, remat: bool = False
) -> dict:
    """One GRPO update of ``shape``: the JAX learner vs torch AdamW, each against its own measured fp32 matmul
    peak."""
    from relay.learner.xla_cpu import cpu_xla_flags

    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + cpu_xla_flags()).strip()  # before JAX starts
    import torch

    from benchmarks.harness.synthetic import synthetic_batch

    torch.set_num_threads(threads)
    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    batch = synthetic_batch(shape.rows, shape.prompt, shape.response, cfg["vocab_size"], seed=0, group=shape.group)
    share = shape.group > 1 and width > 0  # both sides lay each group's prompt out once (relay.packing share_prompts)
    torch_micro = shape.torch_micro or shape.micro
    real_tokens = float(batch["attention_mask"].sum())
    flops = step_flops(cfg, batch["attention_mask"].sum(1), batch["response_mask"].sum())
    peaks = {"jax": matmul_peak("jax"), "torch": matmul_peak("torch")}
    runs = {
        "jax": time_jax(model_dir, batch, shape.prompt, shape.micro, repeats, width, remat, share),
        "torch": time_torch(model_dir, batch, shape.prompt, torch_micro, repeats, width, share),
    }
    summary = {}
    for name, run in runs.items():
        med = statistics.median(run["seconds"])
        summary[name] = {
            "median_seconds": med,
            "spread_seconds": [min(run["seconds"]), max(run["seconds"])],
            "tokens_per_s": real_tokens / med,
            "gflops_per_s": flops / med / 1e9,
            "mfu_vs_own_peak": flops / med / 1e9 / peaks[name],
        }
    return {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "threads": threads},
        "shape": {**asdict(shape), "torch_micro": torch_micro, "shared_prompts": share},
        "real_tokens_per_step": real_tokens,
        "model_tflops_per_step": flops / 1e12,
        "matmul_peak_gflops": peaks,
        "runs": runs,
        "summary": summary,
        "jax_vs_torch_speedup": summary["torch"]["median_seconds"] / summary["jax"]["median_seconds"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    add_int_options(parser, rows=16, prompt=128, response=256, micro=4)
    parser.add_argument("--torch-micro", type=int, default=0, help="torch's rows per micro-batch; 0: --micro")
    add_int_options(parser, repeats=3)
    parser.add_argument("--threads", type=int, default=0, help="0: every core")
    parser.add_argument("--pack-width", type=int, default=512, help="packed row width; 0: padded rows")
    parser.add_argument("--remat", action="store_true", help="the JAX learner recomputes layers in the backward")
    parser.add_argument(
        "--group", type=int, default=1, help="samples per prompt; > 1 with packing: both sides share each prompt"
    )
    args = parser.parse_args()

    threads = args.threads or os.cpu_count() or 1
    from relay.models.paths import resolve_model_path

    if args.model == "tiny":
        from tempfile import mkdtemp

        from relay.models.tiny import build_tiny_llama

        model_dir = str(build_tiny_llama(Path(mkdtemp(prefix="relay-bench-"))))
    else:
        model_dir = str(resolve_model_path(args.model))
    result = {"date": time.strftime("%Y-%m-%d"), "args": vars(args)}
    shape = UpdateShape(args.rows, args.prompt, args.response, args.micro, args.torch_micro or None, args.group)
    result |= measure(model_dir, shape, args.repeats, threads, args.pack_width, args.remat)
    summary, peaks = result["summary"], result["matmul_peak_gflops"]
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / ("learner.json" if args.model != "tiny" else "learner_tiny.json")
    out.write_text(json.dumps(result, indent=2))
    print(f"| learner | s/step (median of {args.repeats}) | spread | tok/s | GFLOP/s | peak | MFU |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for name, s in summary.items():
        lo, hi = s["spread_seconds"]
        print(
            f"| {name} | {s['median_seconds']:.1f} | {lo:.1f}-{hi:.1f} | {s['tokens_per_s']:.0f} | "
            f"{s['gflops_per_s']:.0f} | {peaks[name]:.0f} | {s['mfu_vs_own_peak']:.0%} |"
        )
    print(f"JAX vs torch: {result['jax_vs_torch_speedup']:.2f}x; results: {out}")


if __name__ == "__main__":
    main()
