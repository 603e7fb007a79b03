"""Relay GRPO steps as a benchmark scenario: the real trainer (all roles on a local Ray) on a fixed prompt set.

A scenario is a model, prompts per step x ``n``, lengths, learning rate and a step count. The dataset is
the first ``prompts`` GSM8K training problems (so every step trains on the same problems, in a shuffled
order), written to a JSONL file so that a baseline (TRL) can be given exactly the same problems and chat
template. The first step compiles the learner's program
(cached on disk for later runs) and warms up the engines, so it is reported but kept out of the medians.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relay.metrics import outcomes as om
from relay.metrics import policy as pm
from relay.metrics import system as sm
from relay.repo import REPO_ROOT

# Per-step metrics a scenario reports (all from metrics.jsonl).
PHASES = (
    sm.TIMING_STEP,
    sm.TIMING_ROLLOUT,
    sm.TIMING_ACTOR_REF_AND_REWARD,
    sm.TIMING_UPDATE,
    sm.TIMING_SYNC,
    sm.TIMING_OVERHEAD,
    *(sm.TIMING_ROLE_COMPUTE.format(role=role) for role in ("rollout", "actor_ref", "reward", "update")),
    sm.SYNC_SECONDS,
    sm.SYNC_BYTES,
    sm.THROUGHPUT_ROLLOUT,
    sm.THROUGHPUT_LEARNER,
    sm.MEMORY_ROLES_PEAK,
    *(
        template.format(role=role)
        for role in ("rollout", "actor_ref", "reward", "learner")
        for template in (sm.MEMORY_PEAK_RSS, sm.MEMORY_SHARED)
    ),
    pm.BATCH_PADDING_SHARE,
    pm.BATCH_PADDING_SHARE_UNPACKED,
    pm.BATCH_PADDING_SHARE_ACTOR_REF,
    om.REWARD_MEAN,
    om.RESPONSE_LENGTH_MEAN,
    pm.LOGPROB_GAP_ROLLOUT_MAX,
)


@dataclass(frozen=True)
class Scenario:
    model_dir: str
    prompts: int  # per step
    n: int
    max_new_tokens: int
    steps: int  # measured steps (one warm-up step more is run)
    lr: float = 1e-6
    max_prompt_length: int = 256
    replicas: int = 1
    extra: tuple[str, ...] = ()  # more --set overrides


def trl_micro_batch(shape: dict[str, Any]) -> int:
    """TRL's sequences per forward/backward: 4, or the whole batch when smaller (8 x ~400 tokens of SmolLM2
    activations without checkpointing took a trainer to 11 GB). Relay uses its preset's
    ``train.micro_batch_size`` (configs/default.yaml: one packed row of 512 tokens, its leanest)."""
    return min(4, shape["prompts"] * shape["n"])


def problems_file(count: int, out_dir: Path) -> Path:
    """The first ``count`` GSM8K training problems as a JSONL file (the scenario's whole dataset)."""
    lines = (REPO_ROOT / "data" / "gsm8k" / "train.jsonl").read_text().splitlines()[:count]
    path = out_dir / f"train_first{count}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def overrides(s: Scenario, train_file: Path, out_dir: Path, name: str) -> list[str]:
    """The trainer settings of a scenario (on top of configs/default.yaml)."""
    return [
        f"model.path={s.model_dir}",
        f"data.train_path={train_file}",
        f"data.max_prompt_length={s.max_prompt_length}",
        f"data.max_response_length={s.max_new_tokens}",
        f"rollout.batch_size={s.prompts}",
        f"rollout.n={s.n}",
        f"rollout.replicas={s.replicas}",
        f"rollout.resources.cpus={0.5 / s.replicas}",
        # one replica computes on every core; several split the cores (each bound to its own by vLLM-CPU)
        f"rollout.resources.threads={0 if s.replicas == 1 else max(1, (os.cpu_count() or 1) // s.replicas)}",
        f"train.optimizer.lr_schedule.peak_value={s.lr}",
        f"trainer.total_training_steps={s.steps + 1}",
        f"trainer.output_dir={out_dir}",
        f"trainer.run_name={name}",
        "trainer.save_freq=-1",
        "trainer.save_final=false",
        "trainer.test_freq=-1",
        *s.extra,
    ]


def run_relay(s: Scenario, name: str = "relay", work_dir: Path | None = None) -> dict[str, Any]:
    """Run the scenario with the trainer (Ray must be initialised); returns per-step metrics and medians."""
    from relay.config import load_config
    from trainer import train

    work = Path(work_dir or tempfile.mkdtemp(prefix="relay-bench-"))
    train_file = problems_file(s.prompts, work)
    loaded = load_config(REPO_ROOT / "configs" / "default.yaml", overrides(s, train_file, work, name), environ={})
    run_dir = work / name
    code = train(loaded, Path(s.model_dir), run_dir)
    if code != 0:
        raise RuntimeError(f"relay scenario {name} failed with exit code {code}; see {run_dir}")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steps = [{k: float(r[k]) for k in PHASES if k in r} for r in rows]
    measured = steps[1:] or steps
    return {
        "scenario": s.__dict__ | {"extra": list(s.extra)},
        "warmup_step": steps[0],
        "steps": measured,
        "median": {k: statistics.median(st[k] for st in measured) for k in measured[0]},
        "spread": {k: [min(st[k] for st in measured), max(st[k] for st in measured)] for k in measured[0]},
    }
