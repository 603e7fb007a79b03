"""A warm start as a Relay job (``sft.enable``): only the learner role starts, the loss falls on the training traces
and the validation ones, and a run stopped and resumed continues exactly like one that never stopped."""

from __future__ import annotations

import json

from relay.checkpoint import checkpoint_path
from relay.config import load_config
from relay.repo import CONFIGS_DIR
from relay.run.digest import computed_metrics
from trainer import train


def _loaded(model_dir, out, name: str, steps: int, save_freq: int = -1, test_freq: int = -1):
    overrides = [
        f"model.path={model_dir}",
        "sft.train_size=24",
        "sft.val_size=8",
        "rollout.batch_size=8",
        "data.max_response_length=128",
        "train.optimizer.lr_schedule.peak_value=1e-3",
        f"trainer.total_training_steps={steps}",
        f"trainer.save_freq={save_freq}",
        f"trainer.test_freq={test_freq}",
        f"trainer.output_dir={out}",
        f"trainer.run_name={name}",
    ]
    return load_config(CONFIGS_DIR / "sft_gsm8k_tools.yaml", overrides, environ={})


def test_a_warm_start_trains_the_learner_alone(ray_session, tiny_model_dir, tmp_path) -> None:
    run = tmp_path / "sft"
    assert train(_loaded(tiny_model_dir, tmp_path, "sft", 3, test_freq=2), tiny_model_dir, run) == 0
    (roles,) = [e for e in map(json.loads, (run / "events.jsonl").read_text().splitlines()) if e["event"] == "roles"]
    assert list(roles["nodes"]) == ["learner-0"]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["actor/loss"] < rows[0]["actor/loss"]
    validated = [r["val/loss"] for r in rows if "val/loss" in r]
    assert len(validated) == 2 and validated[-1] < validated[0]
    assert (checkpoint_path(run, 3) / "hf" / "config.json").is_file()  # the model.path GRPO starts from


def test_a_resumed_warm_start_equals_the_uninterrupted_one(ray_session, tiny_model_dir, tmp_path) -> None:
    full, part = tmp_path / "full", tmp_path / "part"
    assert train(_loaded(tiny_model_dir, tmp_path, "full", 4), tiny_model_dir, full) == 0
    assert train(_loaded(tiny_model_dir, tmp_path, "part", 2, save_freq=1), tiny_model_dir, part) == 0
    assert train(_loaded(tiny_model_dir, tmp_path, "part", 4), tiny_model_dir, part, checkpoint_path(part, 1)) == 0
    assert computed_metrics(full) == computed_metrics(part)
