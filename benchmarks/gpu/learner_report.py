"""The report of ``python -m benchmarks.gpu.learner``: each model's figures from its sides' results (median step
time, throughput, MFU, peak memory, and the learner against the torch baseline), the Markdown table and the failed
sides."""

from __future__ import annotations

import statistics
from typing import Any


def summarise(model: str, runs: dict[str, dict], peak_tflops: float | None) -> dict[str, Any]:
    """One table row's figures from a model's sides (None where a side failed)."""
    jax_run, torch_run = runs.get("jax", {}), runs.get("torch", {})
    row: dict[str, Any] = {"model": model}
    for name, run in (("jax", jax_run), ("torch", torch_run)):
        if "seconds" not in run:
            continue
        seconds = statistics.median(run["seconds"])
        row[name] = {
            "seconds": seconds,
            "tokens_per_s": run["real_tokens"] / seconds,
            "mfu": run["flops"] / seconds / 1e12 / peak_tflops if peak_tflops else None,
            "peak_gib": run["peak_bytes"] / 2**30,
        }
    if "jax" in row:
        row["jax"]["estimate_gib"] = jax_run["estimate_bytes"] / 2**30
    if "jax" in row and "torch" in row:
        row["speed_vs_torch"] = row["torch"]["seconds"] / row["jax"]["seconds"]
        row["memory_vs_torch"] = row["jax"]["peak_gib"] / row["torch"]["peak_gib"]
    return row


def _cell(value: Any, fmt: str) -> str:
    """``value`` in ``fmt``, or ``-`` when there is none."""
    return "-" if value is None else format(value, fmt)


def markdown_table(rows: list[dict], runs: dict[str, dict[str, dict]]) -> str:
    """The benchmark's table: learner and torch side by side, the estimate beside the peak, export and gap."""
    head = (
        "| model | Relay s/step | tok/s | MFU | peak GiB | estimate GiB | export f32 s (GB) | export bf16 s (GB) "
        "| torch s/step | torch tok/s | torch MFU | torch peak GiB | speed vs torch | memory vs torch "
        "| log-prob gap mean / max |\n" + "|---" * 15 + "|"
    )
    lines = [head]
    for row in rows:
        j, t, jr = row.get("jax", {}), row.get("torch", {}), runs[row["model"]].get("jax", {})
        exports = jr.get("exports", {})
        export = {
            k: f"{v['seconds']:.2f} ({v['bytes'] / 1e9:.2f})" if v else "-"
            for k, v in ((d, exports.get(d)) for d in ("float32", "bfloat16"))
        }
        gap = f"{jr['logprob_gap_mean']:.2e} / {jr['logprob_gap_max']:.2e}" if "logprob_gap_max" in jr else "-"
        cells = [
            row["model"], _cell(j.get("seconds"), ".3f"), _cell(j.get("tokens_per_s"), ",.0f"),
            _cell(j.get("mfu"), ".1%"), _cell(j.get("peak_gib"), ".2f"), _cell(j.get("estimate_gib"), ".2f"),
            export["float32"], export["bfloat16"], _cell(t.get("seconds"), ".3f"), _cell(t.get("tokens_per_s"), ",.0f"),
            _cell(t.get("mfu"), ".1%"), _cell(t.get("peak_gib"), ".2f"), _cell(row.get("speed_vs_torch"), ".2f"),
            _cell(row.get("memory_vs_torch"), ".2f"), gap,
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def errors_of(runs: dict[str, dict[str, dict]]) -> list[str]:
    """``model/side: error`` for every side that failed."""
    return [f"{m}/{s}: {r['error'].strip()}" for m, sides in runs.items() for s, r in sides.items() if "error" in r]
