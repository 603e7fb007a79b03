"""Markdown tables from a ``benchmarks.speed.run`` result, and their place in BENCHMARKS.md."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from relay.metrics import outcomes as om
from relay.metrics import system as sm


def _ms(s: dict[str, Any], fmt: str = "{:.1f}") -> str:
    """``median (min–max)`` of a :func:`benchmarks.speed.run.spread` dict."""
    return f"{fmt.format(s['median'])} ({fmt.format(s['min'])}–{fmt.format(s['max'])})"


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2] if values else float("nan")


def _step_table(q: dict) -> list[str]:
    relay, trl = q["relay"], q["trl"]
    med = relay["median"]
    phases = trl.get("phases", [])[1:] or trl.get("phases", [])  # without the warm-up step
    generate = _median([p["generate"] for p in phases])
    ref_and_reward = _median([p["generate_and_score"] - p["generate"] for p in phases])
    train = _median([p["train"] for p in phases])
    s = q["shape"]
    return [
        f"Same problems, {s['prompts']} prompts × n={s['n']}, {s['max_new_tokens']} new tokens, lr 1e-6, "
        f"{len(relay['steps'])} measured steps after one warm-up step each.",
        "",
        "| | s/step median (min–max) | ratio | peak memory GiB |",
        "|---|---:|---:|---:|",
        f"| TRL GRPOTrainer | {_ms(q['trl_seconds_per_step'])} | 1.00 | {trl['peak_rss_gib']:.1f} (one process) |",
        f"| Relay | {_ms(q['relay_seconds_per_step'])} | **{q['relay_over_trl']:.2f}×** | "
        f"{med[sm.MEMORY_ROLES_PEAK]:.1f} (roles summed; {q['memory_relay_over_trl']:.2f}×) |",
        "",
        "| phase (median s) | Relay | TRL |",
        "|---|---:|---:|",
        f"| generation | {med[sm.TIMING_ROLLOUT]:.1f} | {generate:.1f} |",
        f"| reference log-probs and reward (Relay: concurrently) | {med[sm.TIMING_ACTOR_REF_AND_REWARD]:.1f} | "
        f"{ref_and_reward:.1f} |",
        f"| update (forward, backward, optimizer) | {med[sm.TIMING_UPDATE]:.1f} | {train:.1f} |",
        f"| weight sync | {med[sm.TIMING_SYNC]:.2f} | — |",
        f"| driver + Ray, outside every role | {med[sm.TIMING_OVERHEAD]:.2f} | — |",
    ]


def _rollout_table(q: dict, step: dict | None) -> list[str]:
    hf = q["hf"]["median_tokens_per_s"]
    rows = [
        ("transformers engine (`rollout.engine=hf`)", q["hf"]),
        ("Relay's vLLM engine", q["vllm"]),
        ("the same vLLM `LLM.generate`, called directly", q["vllm_direct"]),
    ]
    lines = [
        f"{q['prompts']} prompts × n={q['n']}, {q['max_new_tokens']} new tokens, temperature 1.0, seeded.",
        "",
        "| generator | new tok/s median (min–max) | vs transformers |",
        "|---|---:|---:|",
    ]
    for name, r in rows:
        rates = r["tokens_per_s"]
        lines.append(
            f"| {name} | {r['median_tokens_per_s']:.0f} ({min(rates):.0f}–{max(rates):.0f}) | "
            f"{r['median_tokens_per_s'] / hf:.2f}× |"
        )
    if step is not None:
        med, sh = step["relay"]["median"], step["shape"]
        rate = med[om.RESPONSE_LENGTH_MEAN] * sh["prompts"] * sh["n"] / med[sm.TIMING_ROLLOUT]
        lines.append(
            f"| Relay's rollout phase in a training step ({sh['prompts']}×{sh['n']}, {sh['max_new_tokens']} tokens; "
            f"driver wall time incl. Ray, padding, decoding) | {rate:.0f} | {rate / hf:.2f}× |"
        )
    if step is not None and step["trl"].get("generation_tokens_per_s"):
        rate = step["trl"]["generation_tokens_per_s"]
        lines.append(f"| TRL's generation inside GRPOTrainer (step shape) | {rate:.0f} | {rate / hf:.2f}× |")
    lines += ["", f"Relay's engine / vLLM direct: **{q['relay_vllm_over_direct']:.3f}**."]
    return lines


def _learner_table(q: dict) -> list[str]:
    sh = q["shape"]
    lines = [
        f"{sh['rows']} rows × ({sh['prompt']} + {sh['response']}) tokens, micro-batch {sh['micro']}; "
        f"{q['model_tflops_per_step']:.2f} model TFLOP per step.",
        "",
        "| learner | s/update median (min–max) | tok/s | GFLOP/s | matmul peak | MFU |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, s in q["summary"].items():
        lo, hi = s["spread_seconds"]
        lines.append(
            f"| {name} | {s['median_seconds']:.2f} ({lo:.2f}–{hi:.2f}) | {s['tokens_per_s']:.0f} | "
            f"{s['gflops_per_s']:.0f} | {q['matmul_peak_gflops'][name]:.0f} | {s['mfu_vs_own_peak']:.0%} |"
        )
    lines += ["", f"JAX update / torch update time: **{1 / q['jax_vs_torch_speedup']:.2f}×**."]
    return lines


def _overheads_table(q: dict) -> list[str]:
    return [
        "| | median (min–max) |",
        "|---|---:|",
        f"| driver + Ray + serialisation, share of the step | {_ms(q['driver_and_ray_share'], '{:.1%}')} |",
        f"| weight sync, share of the step | {_ms(q['sync_share'], '{:.1%}')} |",
        f"| weight sync seconds ({q['sync_bytes'] / 1e6:.0f} MB) | {_ms(q['sync_seconds'], '{:.2f}')} |",
        f"| plain copy of the same bytes, seconds | {_ms(q['plain_copy_seconds'], '{:.3f}')} |",
        f"| sync / plain copy | {q['sync_over_plain_copy']:.1f}× ({q['sync_bytes_per_s'] / 1e9:.2f} GB/s) |",
    ]


def _scaling_table(q: dict) -> list[str]:
    lines = [
        f"{q['max_new_tokens']} new tokens per sample.",
        "",
        "| prompts × n | sequences | s/step median (min–max) | rollout s | update s | s/sequence vs smallest |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, g in q["grid"].items():
        lines.append(
            f"| {name} | {g['sequences']} | {_ms(g['step_seconds'])} | {g['rollout_seconds']['median']:.1f} | "
            f"{g['update_seconds']['median']:.1f} | {g['seconds_per_sequence_vs_smallest']:.2f} |"
        )
    lines += ["", "| rollout replicas | rollout s | rollout tok/s |", "|---:|---:|---:|"]
    for count, r in q["replicas"].items():
        lines.append(f"| {count} | {_ms(r['rollout_seconds'])} | {_ms(r['rollout_tokens_per_s'], '{:.0f}')} |")
    lines += ["", f"2 replicas / 1 replica, rollout tokens/s: **{q['two_replicas_over_one']:.2f}×**."]
    return lines


def _reward_table(q: dict) -> list[str]:
    return [
        f"{q['items']} GSM8K gold solutions graded against their answers (all score 1.0).",
        "",
        "| grader processes | items/s median (min–max) |",
        "|---:|---:|",
        f"| 1 | {_ms(q['one_process'], '{:.0f}')} |",
        f"| {q['workers']} | {_ms(q['n_processes'], '{:.0f}')} |",
        "",
        f"{q['workers']} processes / 1: **{q['speedup']:.2f}×**.",
    ]


SECTIONS = (
    ("step_vs_trl", "Step time vs TRL GRPOTrainer"),
    ("rollout", "Rollout"),
    ("learner", "Learner"),
    ("overheads", "Overheads"),
    ("scaling", "Scaling"),
    ("reward", "Reward grading"),
)


def provenance(result: dict) -> str:
    """Where a section's figures come from: date, machine, model, repeats, command, versions."""
    m, v = result["machine"], result["versions"]
    return (
        f"_{result['date']}, {m['cpus']} CPU cores, {m['memory_gib']} GiB ({m['platform']}); model "
        f"`{result['model']}`, {result['repeats']} measured repeats; `{result['command']}`; "
        + ", ".join(f"{k} {val}" for k, val in v.items())
        + "._"
    )


def sections(result: dict) -> dict[str, str]:
    """One Markdown block per question in ``result`` (a ``benchmarks.speed.run`` JSON), each with its provenance."""
    q = result["questions"]
    tables = {
        "step_vs_trl": _step_table,
        "rollout": lambda x: _rollout_table(x, q.get("step_vs_trl")),
        "learner": _learner_table,
        "overheads": _overheads_table,
        "scaling": _scaling_table,
        "reward": _reward_table,
    }
    out = {}
    for key, title in SECTIONS:
        if key in q:
            out[key] = "\n".join([f"#### {title}", "", provenance(result), "", *tables[key](q[key])]) + "\n"
    return out


def markdown(result: dict) -> str:
    """Every section of ``result`` in one text."""
    return "\n".join(sections(result).values())


def update_benchmarks_md(path: Path, mode: str, blocks: dict[str, str]) -> None:
    """Replace each question's block between ``<!-- bench:<mode>:<question> -->`` and
    ``<!-- /bench:<mode>:<question> -->``; a block without markers yet is appended. Sections of questions
    not in ``blocks`` (a run with ``--only``) are left as they are."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    for question, body in blocks.items():
        begin, end = f"<!-- bench:{mode}:{question} -->", f"<!-- /bench:{mode}:{question} -->"
        block = f"{begin}\n{body}{end}"
        pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
        found = pattern.search(text)
        text = text[: found.start()] + block + text[found.end() :] if found else text.rstrip("\n") + f"\n\n{block}\n"
    path.write_text(text)
