"""actor_ref forward: the padded layout vs packed real tokens, on one realistic batch, in one run.

    python -m benchmarks.actor_ref_packing [--model smollm2-135m] [--rows 32] [--prompt-width 192]
        [--prompt-min 60] [--prompt-max 140] [--response-width 128] [--response-min 20]
        [--response-max 128] [--micro 8] [--repeats 2] [--threads 0]

Rows are ``[prompt left-padded to --prompt-width | response right-padded to --response-width]`` with real
lengths drawn uniformly from the given ranges (seed 0). The padded forward
(:func:`relay.engines.torch_logprobs.padded_response_log_probs`, the previous actor_ref code) runs the trunk
on every slot and the LM head on every response slot; the packed one
(:func:`relay.engines.torch_logprobs.response_log_probs`) only on real tokens. Both use ``--micro`` rows per
forward. Prints a Markdown table: best and mean seconds, padding share (padded slots / slots computed) and
real tokens per second, and the largest log-prob difference between the two on response tokens.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def make_batch(args: argparse.Namespace, vocab: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(input_ids, attention_mask, position_ids)`` of ``args.rows`` rows in the rollout layout."""
    rng = np.random.default_rng(0)
    p_width, r_width = args.prompt_width, args.response_width
    mask = np.zeros((args.rows, p_width + r_width), np.int32)
    for i in range(args.rows):
        mask[i, p_width - rng.integers(args.prompt_min, args.prompt_max + 1) : p_width] = 1
        mask[i, p_width : p_width + rng.integers(args.response_min, args.response_max + 1)] = 1
    ids = np.where(mask == 1, rng.integers(3, vocab, mask.shape), 0).astype(np.int32)
    return ids, mask, np.clip(np.cumsum(mask, axis=1) - 1, 0, None).astype(np.int32)


def timed(fn, repeats: int) -> tuple[list[float], np.ndarray]:
    """Seconds of each of ``repeats`` calls, and the last call's result."""
    seconds, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        seconds.append(time.perf_counter() - start)
    return seconds, out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m", help="HF directory, or smollm2-135m")
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--prompt-width", type=int, default=192)
    parser.add_argument("--prompt-min", type=int, default=60)
    parser.add_argument("--prompt-max", type=int, default=140)
    parser.add_argument("--response-width", type=int, default=128)
    parser.add_argument("--response-min", type=int, default=20)
    parser.add_argument("--response-max", type=int, default=128)
    parser.add_argument("--micro", type=int, default=8, help="rows per forward (actor_ref.micro_batch_size)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: every core)")
    args = parser.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM

    from relay.engines.torch_logprobs import padded_response_log_probs, response_log_probs
    from relay.engines.torch_packing import plan_packing
    from relay.models.paths import resolve_model_path

    if args.threads:
        torch.set_num_threads(args.threads)
    path = resolve_model_path(args.model)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa").eval()
    ids, mask, pos = make_batch(args, model.config.vocab_size)
    p_width = args.prompt_width
    real = int(mask.sum())

    def run(fn):
        return lambda: fn(model, ids, mask, pos, p_width, 1.0, args.micro)

    padded_s, padded = timed(run(padded_response_log_probs), args.repeats)
    packed_s, packed = timed(run(response_log_probs), args.repeats)
    plan = plan_packing(mask, p_width)
    response = mask[:, p_width:].astype(bool)
    shares = {"padded": 1 - real / mask.size, "packed": plan.padding_share(args.micro)}
    forwards = {"padded": -(-args.rows // args.micro), "packed": len(plan.micro_batches(args.micro))}
    print(
        f"model {path.name}, {args.rows} rows of [{p_width} | {args.response_width}], {real} real tokens, "
        f"{args.micro} rows per forward, {torch.get_num_threads()} torch threads, {args.repeats} repeats\n"
    )
    print("| forward | forwards | padding share | best s | mean s | real tokens/s |")
    print("|---|---|---|---|---|---|")
    for name, seconds in (("padded", padded_s), ("packed", packed_s)):
        best = min(seconds)
        print(
            f"| {name} | {forwards[name]} | {shares[name]:.3f} | {best:.2f} | {statistics.mean(seconds):.2f} "
            f"| {real / best:.0f} |"
        )
    print(f"\npadded / packed (best): {min(padded_s) / min(packed_s):.2f}x; ", end="")
    print(f"max |packed - padded| on response tokens: {np.abs(packed - padded)[response].max():.2e}")


if __name__ == "__main__":
    main()
