"""Rollout tokens/s: the vLLM engine vs the transformers engine, same model, prompts and sampling, one run.

    python -m benchmarks.speed.rollout_engines [--prompts 8] [--n 4] [--max-new-tokens 128] [--repeats 3]

Also the same vLLM ``LLM`` called directly (no Relay wrapper), the "within 3%" reference.

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

from benchmarks.harness.cli import add_int_options
from relay.repo import REPO_ROOT

RESULTS = REPO_ROOT / "benchmarks" / "results"


def _prompts(model_dir: Path, count: int) -> list[list[int]]:
    from transformers import AutoTokenizer

    from relay.data.gsm8k import build_messages, load_gsm8k

    tok = AutoTokenizer.from_pretrained(model_dir)
    examples = load_gsm8k(REPO_ROOT / "data/gsm8k/test.jsonl")[:count]
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


def _time_raw_vllm(llm, prompts, sampling, repeats: int) -> dict:
    """vLLM used directly: ``LLM.generate`` with the same prompts, seeds and log-probs as Relay's engine asks."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    requests = [TokensPrompt(prompt_token_ids=list(p)) for p in prompts]
    rates, seconds = [], []
    for r in range(repeats):
        params = [
            SamplingParams(
                n=sampling.n,
                temperature=sampling.temperature,
                max_tokens=sampling.max_new_tokens,
                logprobs=0,
                stop_token_ids=[2],
                seed=r + i * sampling.n,
            )
            for i in range(len(prompts))
        ]
        start = time.perf_counter()
        outs = llm.generate(requests, params, use_tqdm=False)
        elapsed = time.perf_counter() - start
        tokens = sum(len(c.token_ids) for o in outs for c in o.outputs)
        rates.append(tokens / elapsed)
        seconds.append(elapsed)
    return {"tokens_per_s": rates, "seconds": seconds, "median_tokens_per_s": statistics.median(rates)}


def measure(model_dir: Path, prompt_count: int, n: int, max_new_tokens: int, repeats: int) -> dict:
    """New tokens/s of the transformers engine, Relay's vLLM engine and the same vLLM ``LLM`` called directly
    (same prompts, sampling and seeds), and a vLLM weight sync against a plain copy of the same bytes."""
    import torch

    from relay.engines.base import SamplingSettings
    from relay.engines.hf_engine import HFRolloutEngine
    from relay.engines.vllm_engine import VLLMRolloutEngine
    from relay.models.hf_params import load_hf_checkpoint, params_to_hf
    from relay.models.llama_config import LlamaConfig

    threads = os.cpu_count() or 1
    torch.set_num_threads(threads)
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{threads - 1}")
    prompts = _prompts(model_dir, prompt_count)
    sampling = SamplingSettings(n=n, max_new_tokens=max_new_tokens, temperature=1.0, seed=0)

    hf = HFRolloutEngine(str(model_dir), eos_token_ids=[2], pad_token_id=2)
    hf_result = _time_engine(hf, prompts, sampling, repeats)
    del hf
    vllm = VLLMRolloutEngine(str(model_dir), [2], max_model_len=1024, gpu_memory_utilization=0.3, kv_cache_gib=1.0)
    vllm_result = _time_engine(vllm, prompts, sampling, repeats)
    raw_result = _time_raw_vllm(vllm.llm, prompts, sampling, repeats)

    weights = params_to_hf(load_hf_checkpoint(model_dir, LlamaConfig.from_pretrained(model_dir)))
    nbytes = sum(v.nbytes for v in weights.values())
    sync, copy = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        vllm.load_weights(weights)
        sync.append(time.perf_counter() - start)
        start = time.perf_counter()
        _ = {k: np.copy(v) for k, v in weights.items()}
        copy.append(time.perf_counter() - start)
    del vllm
    return {
        "machine": f"{platform.processor() or platform.machine()}, {threads} cores",
        "prompts": prompt_count,
        "n": n,
        "max_new_tokens": max_new_tokens,
        "hf": hf_result,
        "vllm": vllm_result,
        "vllm_direct": raw_result,
        "vllm_over_hf": vllm_result["median_tokens_per_s"] / hf_result["median_tokens_per_s"],
        "relay_vllm_over_direct": vllm_result["median_tokens_per_s"] / raw_result["median_tokens_per_s"],
        "sync_seconds": sync,
        "plain_copy_seconds": copy,
        "sync_bytes": nbytes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    add_int_options(parser, prompts=8, n=4, max_new_tokens=128, repeats=3)
    args = parser.parse_args()

    from relay.models.paths import resolve_model_path

    result = {"date": time.strftime("%Y-%m-%d"), "args": vars(args)}
    result |= measure(resolve_model_path(args.model), args.prompts, args.n, args.max_new_tokens, args.repeats)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "rollout_engines.json").write_text(json.dumps(result, indent=2))
    med = statistics.median
    hf_rate = result["hf"]["median_tokens_per_s"]
    print("| engine | new tok/s (median) | spread | vs transformers |")
    print("|---|---:|---|---:|")
    for name in ("hf", "vllm", "vllm_direct"):
        r = result[name]
        print(
            f"| {name} | {r['median_tokens_per_s']:.0f} | {min(r['tokens_per_s']):.0f}–{max(r['tokens_per_s']):.0f} | "
            f"{r['median_tokens_per_s'] / hf_rate:.2f}× |"
        )
    sync, copy, nbytes = result["sync_seconds"], result["plain_copy_seconds"], result["sync_bytes"]
    print(
        f"\nvLLM weight sync of {nbytes / 1e6:.0f} MB: median {med(sync):.2f} s "
        f"({med(sync) / med(copy):.1f}× a plain copy of the same bytes, {med(copy):.2f} s)"
    )


if __name__ == "__main__":
    main()
