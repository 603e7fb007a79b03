"""The weight sync when the rollout sits on another node than the learner, beside the same-node sync, each as a
ratio to a plain copy of the same bytes measured in the same invocation.

    python -m benchmarks.speed.cross_node_sync [--model smollm2-135m] [--steps 3] [--no-write]

Two runs of ``python trainer.py`` (the default preset, short responses) on clusters started here with
``ray start`` (:mod:`benchmarks.harness.ray_head`): one node of 4 CPUs (rollout and learner together: the memory-file
sync, ``trainer.weight_sync`` resolves to ``shared_memory``), and two nodes of 2 CPUs with the rollout and the
learner forced apart by their CPU reservations (``object_store``: the learner's ``ray.put``, the rollout node's
pull through Ray's object manager, vLLM's reload). Both nodes of the second cluster are raylets on this machine's
loopback addresses, so the transfer crosses Ray's object managers but no physical network: on a real network
add the bytes over its bandwidth.

Per run: the medians of ``sync/seconds`` (the whole sync as the step sees it), ``sync/export_seconds`` (the
learner's publish: ``ray.put`` or the memory file) and ``sync/rollout_load_seconds`` (the rollout's fetch and
vLLM's reload) over the steps after the first (the first includes warm-up), and ``sync/bytes``; the baseline
is ``np.copy`` of a buffer of that many bytes (median of 5). Writes ``benchmarks/results/cross_node_sync.json``
and the section between the ``cross-node-sync`` markers of BENCHMARKS.md. Run it alone on the machine: it starts
its own raylets and stops only those.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.harness.cli import section_parser
from benchmarks.harness.publish import publish
from benchmarks.harness.ray_head import isolated_head, worker_node
from relay.metrics import system as sm
from relay.repo import REPO_ROOT

MARKS = ("<!-- cross-node-sync:begin -->", "<!-- cross-node-sync:end -->")
TITLE = "Weight sync across nodes (object store) beside the same node (memory file)"
APART = ("rollout.resources.cpus=1.5", "learner.resources.cpus=1.5", "reward.resources.cpus=0.5")


def run_trainer(head, model: str, steps: int, out: Path) -> list[dict]:
    """``python trainer.py`` on ``head``'s cluster; its metrics rows."""
    overrides = [
        f"model.path={model}",
        "data.max_response_length=32",
        f"trainer.total_training_steps={steps}",
        "trainer.time_budget_minutes=null",
        f"trainer.output_dir={out}",
        "trainer.run_name=run",
        *APART,
    ]
    argv = [sys.executable, "trainer.py"] + [arg for o in overrides for arg in ("--set", o)]
    done = subprocess.run(argv, cwd=REPO_ROOT, env=head.driver_env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"trainer.py exited {done.returncode}:\n{done.stderr[-3000:]}")
    events = [json.loads(line) for line in (out / "run" / "events.jsonl").read_text().splitlines()]
    (roles,) = [e for e in events if e["event"] == "roles"]
    rows = [json.loads(line) for line in (out / "run" / "metrics.jsonl").read_text().splitlines()]
    return [{**row, "weight_sync": roles["weight_sync"]} for row in rows]


def copy_seconds(nbytes: int, repeats: int = 5) -> float:
    """Median seconds of ``np.copy`` of an ``nbytes`` buffer into fresh pages."""
    source = np.ones(nbytes // 4, dtype=np.float32)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        copied = np.copy(source)
        samples.append(time.perf_counter() - start)
        del copied
    return statistics.median(samples)


def summarize(rows: list[dict]) -> dict:
    later = rows[1:] or rows
    nbytes = int(rows[-1][sm.SYNC_BYTES])
    out = {"weight_sync": rows[-1]["weight_sync"], "bytes": nbytes, "copy_s": copy_seconds(nbytes)}
    for key, metric in (("sync_s", sm.SYNC_SECONDS), ("export_s", sm.SYNC_EXPORT_SECONDS)):
        out[key] = statistics.median(r[metric] for r in later)
    out["load_s"] = statistics.median(r[sm.SYNC_ROLLOUT_LOAD_SECONDS] for r in later)
    return out


def measure(model: str, steps: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="xnode") as tmp:
        with isolated_head(num_cpus=4) as head:
            one = summarize(run_trainer(head, model, steps, Path(tmp) / "one"))
        with isolated_head(num_cpus=2) as head, worker_node(head, num_cpus=2):
            two = summarize(run_trainer(head, model, steps, Path(tmp) / "two"))
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((ln.split(":", 1)[1].strip() for ln in cpuinfo if ln.startswith("model name")), "?")
    return {
        "same_node": one,
        "cross_node": two,
        "model": model,
        "steps": steps,
        "machine": f"{cpu}, {platform.machine()}, {os.cpu_count()} cores, no GPU",
        "date": time.strftime("%Y-%m-%d"),
    }


def report(result: dict) -> str:
    rows = []
    for label, key in (("same node (memory file)", "same_node"), ("across nodes (object store)", "cross_node")):
        r = result[key]
        ratio = r["sync_s"] / r["copy_s"]
        rows.append(
            f"| {label} | `{r['weight_sync']}` | {r['bytes'] / 1e6:.0f} | {r['export_s']:.3f} | {r['load_s']:.3f} "
            f"| {r['sync_s']:.3f} | {r['copy_s']:.3f} | {ratio:.1f}× |"
        )
    cross, same = result["cross_node"], result["same_node"]
    return "\n".join(
        [
            f"Reproduce: `python -m benchmarks.speed.cross_node_sync --model {result['model']} "
            f"--steps {result['steps']}` "
            f"({result['machine']}; {result['date']}; medians over the steps after the first; both nodes of the "
            "second cluster are raylets on this machine's loopback addresses).",
            "",
            "| sync | `trainer.weight_sync` | MB | learner export s | rollout load s | whole sync s | copy s "
            "| sync × copy |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
            f"Across nodes the sync takes {cross['sync_s'] / same['sync_s']:.2f}× the same-node one.",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = section_parser(__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args(argv)
    if args.steps < 2:
        print(f"error: --steps {args.steps}: must be >= 2 (the first step's sync includes warm-up)", file=sys.stderr)
        return 2
    result = measure(args.model, args.steps)
    publish("cross_node_sync", result, report(result), MARKS, TITLE, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
