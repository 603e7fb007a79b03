"""A curriculum run end to end on the tiny model: reasoning-gym levels on a schedule (``promote_at=0``, two steps
a level), the level in the metrics, events and validation's per-level figures, and a run resumed mid-level equal
to the uninterrupted one bit for bit (the curriculum's state travels in the checkpoint's data cursor). The run also
revisits its unsolved prompts (``data.revisit_unsolved``, every answer of the random model is wrong): the queue
travels in the same cursor, so the resumed run revisits the same prompts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from relay.checkpoint import checkpoint_path
from tests.test_trainer_resume import DETERMINISTIC
from tests.tiny_runs import metric_rows, run_config
from trainer import train

pytest.importorskip("reasoning_gym")

LEVELS = (
    "[{name: d1, options: {datasets: [{name: basic_arithmetic, config: {min_terms: 2, max_terms: 2, max_digits: 1}}]}},"
    " {name: d2, options: {datasets: [{name: basic_arithmetic, config: {min_terms: 2, max_terms: 2, max_digits: 2}}]}}]"
)
CURRICULUM = (
    "data.task=reasoning_gym",
    "data.train_path=null",
    "data.test_path=null",
    "data.generate.test_seed=1000000",
    "data.generate.train_size=32",
    "data.generate.test_size=2",
    "data.generate.options.datasets=[{name: basic_arithmetic}]",
    f"data.curriculum.levels={LEVELS}",
    "data.curriculum.promote_at=0",
    "data.curriculum.window=2",
    "data.revisit_unsolved.enable=true",
    "data.revisit_unsolved.share=0.5",
    "data.revisit_unsolved.delay=1",
    "data.max_response_length=8",
    "rollout.n=2",
    "trainer.deterministic=true",
    "trainer.save_freq=1",
    "trainer.keep_checkpoints=0",
    "trainer.test_freq=4",
    "trainer.val_samples=2",
    "trainer.val_k=0",
    # The curriculum lives in the driver and the data cursor, not the engine: the HF engine's start is ~17
    # CPU-seconds cheaper a run on 2 cores than vLLM's (vLLM's resume-exact run: tests/test_trainer_resume.py).
    "rollout.engine=hf",
)


def _deterministic(run_dir: Path) -> dict[int, dict]:
    keys = (*DETERMINISTIC, "curriculum/level", "curriculum/window_accuracy", "data/revisited", "data/revisit_waiting")
    return {step: {k: r[k] for k in keys if k in r} for step, r in metric_rows(run_dir).items()}


def test_levels_rise_on_schedule_and_a_resumed_run_equals_the_uninterrupted_one(
    ray_session, tiny_model_dir: Path, tmp_path: Path
) -> None:
    run_a = tmp_path / "a"
    overrides = [*CURRICULUM, f"trainer.output_dir={tmp_path}", "trainer.run_name=a"]
    assert train(run_config(tiny_model_dir, 4, overrides), tiny_model_dir, run_a) == 0
    a = _deterministic(run_a)
    assert [a[s]["curriculum/level"] for s in range(4)] == [0.0, 0.0, 1.0, 1.0]
    assert a[0]["data/revisited"] == 0.0 and a[1]["data/revisited"] >= 1.0  # step 0's unsolved prompts, one draw on
    events = [json.loads(line) for line in (run_a / "events.jsonl").read_text().splitlines()]
    assert [(e["step"], e["name"]) for e in events if e["event"] == "curriculum"] == [(2, "d2")]
    last = metric_rows(run_a)[3]
    assert last["val/d1/problems"] == 2.0 and last["val/d2/problems"] == 2.0 and last["val/problems"] == 4.0
    assert "val/d2/lenient_accuracy_greedy" in last

    # resumed after step 1: mid-level, one accuracy in the window; the rest of the run must be the same
    run_b = tmp_path / "b"
    shutil.copytree(run_a, run_b)
    resumed = run_config(tiny_model_dir, 4, [], resume=run_b)
    assert train(resumed, tiny_model_dir, run_b, checkpoint_path(run_b, 1)) == 0
    b = _deterministic(run_b)
    for step in (1, 2, 3):
        assert b[step] == a[step], (step, a[step], b[step])
