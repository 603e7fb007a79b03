"""Where a weight sync's time goes: the learner's publish, the memory file's reads and vLLM's reload, each against
a plain copy of the same tensors, measured in the same invocation.

    python -m benchmarks.speed.sync_breakdown [--model smollm2-135m] [--repeats 5] [--no-write]

The step benchmark reports one figure, ``sync/seconds`` over a plain copy. This splits it,
outside Ray, on the same 538 MB of fp32 SmolLM2 tensors under HF names (what the learner exports):

- ``plain_copy``: ``np.copy`` of every tensor (fresh pages, as a sync's destination would be): the baseline;
- ``publish``: :meth:`relay.shared_weights.WeightPublisher.publish`, the learner's ``pwrite`` into a new memory file;
- ``load_from_file``: the vLLM engine's :meth:`load_weights` reading that file through its view (what the rollout
  role does);
- ``load_from_dict``: the same load from in-process arrays (no file): the difference is the file's page reads;
- ``repack``: the part of a load spent in vLLM's CPU kernels building their oneDNN matmul handles for the new
  weights (``create_onednn_mm_handler``, from one profiled load; a transform, not a copy).

Writes ``benchmarks/results/sync_breakdown.json`` and the section between the ``sync-breakdown`` markers of
BENCHMARKS.md (``--no-write``: print only). Run it alone on the machine.
"""

from __future__ import annotations

import cProfile
import os
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.cli import section_parser
from benchmarks.harness.publish import publish

MARKS = ("<!-- sync-breakdown:begin -->", "<!-- sync-breakdown:end -->")
TITLE = "Weight sync: where its time goes (vLLM on CPU)"


def hf_weights(model_dir: Path) -> dict[str, np.ndarray]:
    """The checkpoint as the learner exports it: read into the flax tree, flattened back to HF names."""
    from relay.models.hf_params import load_hf_checkpoint, params_to_hf
    from relay.models.llama_config import LlamaConfig

    return params_to_hf(load_hf_checkpoint(model_dir, LlamaConfig.from_pretrained(model_dir)))


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def profiled_seconds(fn: Callable[[], Any], function_name: str) -> float:
    """Seconds ``fn`` spent inside C functions named ``function_name`` (cProfile's own time for them)."""
    profile = cProfile.Profile()
    profile.enable()
    fn()
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    return float(sum(v[2] for k, v in stats.items() if function_name in k[2]))


def summarize(samples: dict[str, list[float]], nbytes: int) -> dict[str, Any]:
    """Medians, and each part over the plain copy's median.

    >>> s = summarize({"plain_copy": [0.1, 0.2, 0.1], "publish": [0.3, 0.3, 0.4]}, 10**9)
    >>> s["median_seconds"]["publish"], s["over_plain_copy"]["publish"], s["plain_copy_gb_per_s"]
    (0.3, 3.0, 10.0)
    """
    medians = {part: statistics.median(values) for part, values in samples.items()}
    copy = medians["plain_copy"]
    return {
        "bytes": nbytes,
        "samples": samples,
        "median_seconds": medians,
        "over_plain_copy": {part: round(seconds / copy, 2) for part, seconds in medians.items()},
        "plain_copy_gb_per_s": round(nbytes / copy / 1e9, 2),
    }


def report(result: dict[str, Any]) -> str:
    """The BENCHMARKS.md section for one invocation's :func:`summarize` output plus its run facts."""
    med, ratio = result["median_seconds"], result["over_plain_copy"]
    rows = [
        ("plain copy of every tensor (baseline)", "plain_copy"),
        ("learner: publish into a memory file (`pwrite`)", "publish"),
        ("rollout: vLLM load from the memory file", "load_from_file"),
        ("rollout: vLLM load from in-process arrays", "load_from_dict"),
        ("of a load: oneDNN handles rebuilt (repack)", "repack"),
    ]
    lines = [
        f"Reproduce: `python -m benchmarks.speed.sync_breakdown --model {result['model']} "
        f"--repeats {result['repeats']}` "
        f"({result['machine']}; {result['date']}; {result['bytes'] / 1e6:.0f} MB of fp32 tensors; medians of "
        f"{result['repeats']}, the repack from one profiled load).",
        "",
        "| part | seconds | × plain copy |",
        "|---|---:|---:|",
    ]
    lines += [f"| {label} | {med[key]:.3f} | {ratio[key]:.1f}× |" for label, key in rows if key in med]
    total = med["publish"] + med["load_from_file"]
    lines += [
        "",
        f"Publish plus load from the file: {total:.3f} s = {total / med['plain_copy']:.1f}× the plain copy "
        f"({result['plain_copy_gb_per_s']:.1f} GB/s).",
    ]
    return "\n".join(lines)


def measure(model: str, repeats: int, kv_cache_gib: float) -> dict[str, Any]:
    from relay.engines.vllm_engine import VLLMRolloutEngine
    from relay.models.paths import resolve_model_path
    from relay.shared_weights import WeightPublisher, opened_weights

    model_dir = resolve_model_path(model)
    weights = hf_weights(model_dir)
    nbytes = sum(v.nbytes for v in weights.values())
    engine = VLLMRolloutEngine(
        str(model_dir), [2], max_model_len=1024, gpu_memory_utilization=0.3, kv_cache_gib=kv_cache_gib
    )
    publisher = WeightPublisher("this-node")
    samples: dict[str, list[float]] = {"plain_copy": [], "publish": [], "load_from_file": [], "load_from_dict": []}

    def load_file(handle: Any) -> None:
        with opened_weights(handle) as view:
            engine.load_weights(view)

    for version in range(repeats + 1):  # the first round warms every path up and is dropped
        copy_s, copies = timed(lambda: {k: np.copy(v) for k, v in weights.items()})
        del copies
        publish_s, handle = timed(lambda v=version: publisher.publish(weights, v))
        file_s, _ = timed(lambda h=handle: load_file(h))
        dict_s, _ = timed(lambda: engine.load_weights(weights))
        publisher.release(handle)
        if version:
            for part, s in zip(samples, (copy_s, publish_s, file_s, dict_s), strict=True):
                samples[part].append(s)
    samples["repack"] = [profiled_seconds(lambda: engine.load_weights(weights), "create_onednn_mm_handler")]
    publisher.close()
    result = summarize(samples, nbytes)
    result.update(
        model=model,
        repeats=repeats,
        machine=f"{platform.machine()}, {os.cpu_count()} cores, no GPU",
        date=time.strftime("%Y-%m-%d"),
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = section_parser(__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kv-cache-gib", type=float, default=0.4)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        print(f"error: --repeats {args.repeats}: must be >= 1", file=sys.stderr)
        return 2
    result = measure(args.model, args.repeats, args.kv_cache_gib)
    publish("sync_breakdown", result, report(result), MARKS, TITLE, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
