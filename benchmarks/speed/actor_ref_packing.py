"""actor_ref forward: the padded layout vs packed real tokens, on one realistic batch, in one run.

    python -m benchmarks.speed.actor_ref_packing [--model smollm2-135m] [--rows 32] [--prompt-width 192]
        [--prompt-min 60] [--prompt-max 140] [--response-width 128] [--response-min 20]
        [--response-max 128] [--micro 8] [--repeats 2] [--threads 0]

Rows are ``[prompt left-padded to --prompt-width | response right-padded to --response-width]`` with real
lengths drawn uniformly from the given ranges (seed 0). The padded forward
(:func:`benchmarks.speed.padded_log_probs.padded_response_log_probs`, the padded layout) runs the trunk
on every slot and the LM head on every response slot; the packed one
(:func:`relay.engines.torch_logprobs.response_log_probs`) only on real tokens. Both use ``--micro`` rows per
forward; after one untimed warm-up call each, they take turns for ``--repeats`` rounds. Prints a Markdown
table: forwards, padding share (padded slots / slots computed), model GFLOPs, best and mean seconds, real
tokens per second; then the padded / packed ratios and the largest log-prob difference on response tokens.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from benchmarks.harness.cli import add_int_options


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


def gflop(config, forwards: list[tuple[int, int]], head_positions: int) -> float:
    """Model GFLOPs of forwards of ``(rows, width)`` plus the LM head on ``head_positions`` positions.

    Per token slot: 2 x the decoder's matmul weights and 4 x width x hidden per layer for the attention
    scores and mixing (a masked score is still computed); per head position: 2 x vocab x hidden.
    """
    h, layers = config.hidden_size, config.num_hidden_layers
    kv = config.num_key_value_heads * (h // config.num_attention_heads)
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * config.intermediate_size
    trunk = sum(n * w * (2 * per_layer + 4 * w * h) * layers for n, w in forwards)
    return (trunk + head_positions * 2 * config.vocab_size * h) / 1e9


def timed(fns: dict[str, Callable[[], np.ndarray]], repeats: int) -> dict[str, tuple[list[float], np.ndarray]]:
    """Each function's seconds per call and last result. The functions take turns (a, b, a, b, ...) so that
    a load that comes and goes on a shared machine falls on both alike."""
    seconds: dict[str, list[float]] = {name: [] for name in fns}
    out: dict[str, np.ndarray] = {}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            out[name] = fn()
            seconds[name].append(time.perf_counter() - start)
    return {name: (seconds[name], out[name]) for name in fns}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m", help="HF directory, or smollm2-135m")
    add_int_options(parser, rows=32, prompt_width=192, prompt_min=60, prompt_max=140)
    add_int_options(parser, response_width=128, response_min=20, response_max=128)
    parser.add_argument("--micro", type=int, default=8, help="rows per forward (actor_ref.micro_batch_size)")
    add_int_options(parser, repeats=2)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: every core)")
    args = parser.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM

    from benchmarks.speed.padded_log_probs import padded_response_log_probs
    from relay.engines.torch_logprobs import response_log_probs
    from relay.engines.torch_packing import plan_packing
    from relay.models.paths import resolve_model_path

    if args.threads:
        torch.set_num_threads(args.threads)
    path = resolve_model_path(args.model)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa").eval()
    ids, mask, pos = make_batch(args, model.config.vocab_size)
    p_width = args.prompt_width
    real = int(mask.sum())

    def run(fn: Callable, rows: slice = slice(None)) -> Callable[[], np.ndarray]:
        return lambda: fn(model, ids[rows], mask[rows], pos[rows], p_width, 1.0, args.micro)

    for fn in (padded_response_log_probs, response_log_probs):  # warm-up: torch's first-call set-up, untimed
        run(fn, slice(0, 2))()
    timings = timed({"padded": run(padded_response_log_probs), "packed": run(response_log_probs)}, args.repeats)
    (padded_s, padded), (packed_s, packed) = timings["padded"], timings["packed"]
    plan = plan_packing(mask, p_width)
    response = mask[:, p_width:].astype(bool)
    padded_shapes = [(min(args.micro, args.rows - i), mask.shape[1]) for i in range(0, args.rows, args.micro)]
    packed_shapes = [(s.stop - s.start, plan.batch_width(s)) for s in plan.micro_batches(args.micro)]
    results = {
        "padded": (padded_s, padded_shapes, 1 - real / mask.size, gflop(model.config, padded_shapes, response.size)),
        "packed": (
            packed_s,
            packed_shapes,
            plan.padding_share(args.micro),
            gflop(model.config, packed_shapes, int(response.sum())),
        ),
    }
    print(
        f"model {path.name}, {args.rows} rows of [{p_width} | {args.response_width}], {real} real tokens, "
        f"{args.micro} rows per forward, {torch.get_num_threads()} torch threads, {args.repeats} repeats\n"
    )
    print_table(results, real)
    print(f"max |packed - padded| on response tokens: {np.abs(packed - padded)[response].max():.2e}")


def print_table(results: dict[str, tuple[list[float], list, float, float]], real: int) -> None:
    """One Markdown row per forward (seconds, shapes, padding share, GFLOP), then the padded / packed ratios."""
    print("| forward | forwards | padding share | model GFLOP | best s | mean s | real tokens/s |")
    print("|---|---|---|---|---|---|---|")
    for name, (seconds, shapes, share, flop) in results.items():
        best = min(seconds)
        print(
            f"| {name} | {len(shapes)} | {share:.3f} | {flop:.0f} | {best:.2f} "
            f"| {statistics.mean(seconds):.2f} | {real / best:.0f} |"
        )
    (pad_s, _, _, pad_f), (pack_s, _, _, pack_f) = results["padded"], results["packed"]
    print(
        f"\npadded / packed: {min(pad_s) / min(pack_s):.2f}x (best), "
        f"{statistics.mean(pad_s) / statistics.mean(pack_s):.2f}x (mean), {pad_f / pack_f:.2f}x (model FLOPs)"
    )


if __name__ == "__main__":
    main()
