"""Rollout tokens/s: the vLLM engine vs the transformers engine, same model, prompts and sampling, one run.

    python -m benchmarks.rollout_engines [--prompts 8] [--n 4] [--max-new-tokens 128] [--repeats 3]

Also times a vLLM weight sync (in-memory reload of every weight) against a plain copy of the same
bytes. Writes benchmarks/results/rollout_engines.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def _prompts(model_dir: Path, count: int) -> list[list[int]]:
    from transformers import AutoTokenizer

    from relay.data.gsm8k import build_messages, load_gsm8k

    tok = AutoTokenizer.from_pretrained(model_dir)
    examples = load_gsm8k(Path(__file__).resolve().parents[1] / "data/gsm8k/test.jsonl")[:count]
    texts = [
        tok.apply_chat_template(build_messages(e.question), add_generation_prompt=True, tokenize=False)
        for e in examples
    ]
    return [list(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"]]


def _time_engine(engine, prompts, sampling, repeats: int) -> dict:
    from dataclasses import replace

    engine.generate(prompts[:1], replace(sampling, n=1, max_new_tokens=8))  # warm-up
    rates, seconds = [], []
    for r in range(repeats):
        start = time.perf_counter()
        gens = engine.generate(prompts, replace(sampling, seed=r))
        elapsed = time.perf_counter() - start
        tokens = sum(len(g.token_ids) for group in gens for g in group)
        rates.append(tokens / elapsed)
        seconds.append(elapsed)
    return {"tokens_per_s": rates, "seconds": seconds, "median_tokens_per_s": statistics.median(rates)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import torch

    from relay.engines.base import SamplingSettings
    from relay.engines.hf_engine import HFRolloutEngine
    from relay.engines.vllm_engine import VLLMRolloutEngine
    from relay.models.hf_params import load_hf_checkpoint, params_to_hf
    from relay.models.llama_config import LlamaConfig
    from relay.models.paths import resolve_model_path

    threads = os.cpu_count() or 1
    torch.set_num_threads(threads)
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{threads - 1}")
    model_dir = resolve_model_path(args.model)
    prompts = _prompts(model_dir, args.prompts)
    sampling = SamplingSettings(n=args.n, max_new_tokens=args.max_new_tokens, temperature=1.0, seed=0)

    hf = HFRolloutEngine(str(model_dir), eos_token_ids=[2], pad_token_id=2)
    hf_result = _time_engine(hf, prompts, sampling, args.repeats)
    del hf
    vllm = VLLMRolloutEngine(str(model_dir), [2], max_model_len=1024, gpu_memory_utilization=0.3)
    vllm_result = _time_engine(vllm, prompts, sampling, args.repeats)

    weights = params_to_hf(load_hf_checkpoint(model_dir, LlamaConfig.from_pretrained(model_dir)))
    nbytes = sum(v.nbytes for v in weights.values())
    sync, copy = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        vllm.load_weights(weights)
        sync.append(time.perf_counter() - start)
        start = time.perf_counter()
        _ = {k: np.copy(v) for k, v in weights.items()}
        copy.append(time.perf_counter() - start)

    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.processor() or platform.machine()}, {threads} cores",
        "args": vars(args),
        "hf": hf_result,
        "vllm": vllm_result,
        "vllm_over_hf": vllm_result["median_tokens_per_s"] / hf_result["median_tokens_per_s"],
        "sync_seconds": sync,
        "plain_copy_seconds": copy,
        "sync_bytes": nbytes,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "rollout_engines.json").write_text(json.dumps(result, indent=2))
    med = statistics.median
    print("| engine | new tok/s (median) | spread | vs transformers |")
    print("|---|---:|---|---:|")
    for name in ("hf", "vllm"):
        r = result[name]
        print(
            f"| {name} | {r['median_tokens_per_s']:.0f} | {min(r['tokens_per_s']):.0f}–{max(r['tokens_per_s']):.0f} | "
            f"{r['median_tokens_per_s'] / hf_result['median_tokens_per_s']:.2f}× |"
        )
    print(
        f"\nvLLM weight sync of {nbytes / 1e6:.0f} MB: median {med(sync):.2f} s "
        f"({med(sync) / med(copy):.1f}× a plain copy of the same bytes, {med(copy):.2f} s)"
    )


if __name__ == "__main__":
    main()
