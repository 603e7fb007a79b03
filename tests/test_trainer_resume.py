"""Kill-and-resume equality: a run stopped at step k and resumed continues exactly like one that never stopped.

The tiny model on CPU with a fixed seed, 8 training prompts and 4 per step, so an epoch is 2 steps:
run A does 4 steps straight with a checkpoint after every step. Run B is A's directory as a crash after step 2's
checkpoint leaves it (its config, its metrics of every step A wrote, the checkpoints after steps 1 and 2). B is
resumed from the mid-epoch checkpoint for one step (its later metric lines dropped, the checkpoint after step 2
written again), then from the epoch-boundary checkpoint, which that resumed run wrote as its final one, for the
last two. Every deterministic metric of B's steps 1-3 must equal A's, bit for bit: resuming loses nothing.
(That two runs with the same seed repeat exactly is what every fault campaign's verdict stands on:
tests/benchmarks/faults/test_chaos.py.)

Both runs carry a reward-model role beside the rule grader (a tiny random classifier, half the reward, z-scored per
batch): the tiny model earns nothing from GSM8K's rule, so the classifier's scores are what moves its weights, and
the resumed run's rewards, scores and updates must still equal the uninterrupted run's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from relay.checkpoint import checkpoint_path, list_checkpoints
from relay.config import LoadedConfig
from relay.repo import REPO_ROOT
from tests.tiny_runs import crashed_copy, metric_rows, run_config
from trainer import train

# metrics that depend only on the data, the samples and the weights (not on wall time or memory)
DETERMINISTIC = (
    "reward/mean",
    "reward/std",
    "reward/accuracy",
    "response/length_mean",
    "response/length_max",
    "actor/loss",
    "actor/pg_loss",
    "actor/kl",
    "actor/entropy",
    "actor/grad_norm",
    "actor/lr",
    "actor/optimizer_steps",
    "logprob_gap/rollout_vs_learner_max",
    "advantage/abs_mean",
    "data/epochs_done",
    "reward_model/score_mean",
    "reward_model/score_std",
    "reward/source_reward_model_mean",
)
# a reward-model role scoring beside the rule grader (``reward_model_dir`` fills the path)
REWARD_MODEL = (
    "reward_model.enable=true",
    "reward.sources=[{source: reward, weight: 1.0}, {source: reward_model, weight: 0.5, normalize: batch}]",
)


def _loaded(
    tiny_model_dir: Path,
    train_file: Path,
    out: Path,
    name: str,
    steps: int,
    save_freq: int,
    resume=None,
    extra=(),
    scorer: tuple[str, ...] = (),
) -> LoadedConfig:
    overrides = [
        *scorer,
        f"data.train_path={train_file}",
        "data.max_response_length=16",
        "rollout.n=2",
        f"trainer.save_freq={save_freq}",
        "trainer.keep_checkpoints=0",
        "trainer.export_hf=true",
        f"trainer.output_dir={out}",
        f"trainer.run_name={name}",
        "trainer.deterministic=true",
        "trainer.test_freq=2",
        "trainer.val_samples=2",
        "trainer.val_k=2",
    ]
    return run_config(tiny_model_dir, steps, overrides, resume, extra)


def _metrics(run_dir: Path) -> dict[int, dict]:
    return {step: {k: r[k] for k in DETERMINISTIC if k in r} for step, r in metric_rows(run_dir).items()}


@pytest.fixture(scope="module")
def reward_model(tmp_path_factory) -> tuple[str, ...]:
    from relay.models.tiny import build_tiny_classifier

    path = build_tiny_classifier("llama", tmp_path_factory.mktemp("reward-model"))
    return (*REWARD_MODEL, f"reward_model.path={path}")


@pytest.fixture(scope="module")
def train_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "train8.jsonl"
    lines = (REPO_ROOT / "data" / "gsm8k" / "train.jsonl").read_text().splitlines()[:8]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_resume_mid_epoch_and_at_an_epoch_boundary_equals_the_uninterrupted_run(
    ray_session, tiny_model_dir, train_file, reward_model, tmp_path, monkeypatch
) -> None:
    run_a, run_b = tmp_path / "a", tmp_path / "b"
    monkeypatch.setenv("RELAY_PLANTED_API_KEY", "sk-planted-7d1c0ffee")  # must never be written anywhere
    uninterrupted = _loaded(tiny_model_dir, train_file, tmp_path, "a", 4, 1, scorer=reward_model)
    assert train(uninterrupted, tiny_model_dir, run_a) == 0
    _check_run_directory(run_a)
    crashed_copy(run_a, run_b, last_checkpoint=2)
    assert [s for s, _ in list_checkpoints(run_b)] == [1, 2]
    assert sorted(_metrics(run_b)) == [0, 1, 2, 3]  # A's lines: a resume drops those after its checkpoint

    # resume from the mid-epoch checkpoint (after step 1): step 1 is run again and replaces the old line
    resumed = _loaded(tiny_model_dir, train_file, tmp_path, "b", 2, 1, resume=run_b)
    assert train(resumed, tiny_model_dir, run_b, checkpoint_path(run_b, 1)) == 0
    # then from the epoch-boundary checkpoint (after step 2 = one full pass over the 8 prompts)
    driver = json.loads((checkpoint_path(run_b, 2) / "driver.json").read_text())
    assert driver["next_step"] == 2 and driver["data"]["position"] in (0, 8)
    resumed = _loaded(tiny_model_dir, train_file, tmp_path, "b", 4, 1, resume=run_b)
    assert train(resumed, tiny_model_dir, run_b, checkpoint_path(run_b, 2)) == 0

    a, b = _metrics(run_a), _metrics(run_b)
    # validation every 2 steps (and at the end): greedy accuracy and pass@2 over 2 test problems
    rows_a = [json.loads(ln) for ln in (run_a / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows_a if "val/accuracy_greedy" in r] == [1, 3]
    assert all(r["val/problems"] == 2 and 0 <= r["val/pass@2"] <= 1 for r in rows_a if "val/pass@2" in r)
    assert sorted(b) == [0, 1, 2, 3]
    for step in (0, 1, 2, 3):  # step 0 is A's own line, kept; steps 1-3 were computed again after resuming
        assert b[step] == a[step], (step, a[step], b[step])
    assert a[3]["data/epochs_done"] == 2.0 and a[3]["actor/optimizer_steps"] == 4.0
    # the reward model scored every step and its scores moved the weights (the rule grader's reward is 0 here)
    assert all(a[s]["reward_model/score_std"] > 0 and a[s]["actor/grad_norm"] > 0 for s in a), a


def _check_run_directory(run_dir: Path) -> None:
    """What a finished run leaves: manifest, events, metrics, TensorBoard, checkpoints; no secret values."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["seed"] == 0 and manifest["git"]["commit"] and manifest["model"]["sha256"]
    assert all(f["sha256"] for f in manifest["data"])
    learner = manifest["memory_estimate"]["actors"]["learner-0"] if manifest["memory_estimate"] else None
    assert learner is None or learner["host_total_gib"] > 0  # the pre-start estimate, kept beside the measured memory
    assert "RELAY_PLANTED_API_KEY" in manifest["env"]["secret_env_names"]
    events = [json.loads(ln)["event"] for ln in (run_dir / "events.jsonl").read_text().splitlines()]
    assert events[0] == "start" and events.count("checkpoint") == 4 and events[-1] == "finish"
    assert events.count("validation") == 2
    assert list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert b"sk-planted-7d1c0ffee" not in path.read_bytes(), path
    # the HF export of the last checkpoint loads in transformers and holds the learner's weights
    from safetensors.numpy import load_file
    from transformers import AutoModelForCausalLM

    last = checkpoint_path(run_dir, 4)
    model = AutoModelForCausalLM.from_pretrained(last / "hf")
    policy = load_file(str(last / "learner" / "policy.safetensors"))
    embed = model.get_input_embeddings().weight.detach().numpy()
    assert (embed == policy["['model.embed_tokens.weight']"]).all()  # keys are tree paths (relay.checkpoint)


def test_a_time_budget_stops_the_run_with_a_final_checkpoint_and_validation(
    ray_session, tiny_model_dir, train_file, tmp_path
) -> None:
    """``trainer.time_budget_minutes`` shorter than a step: one step, then the end-of-run work (validation,
    the final checkpoint) as if the step count had been reached."""
    # the budget is the driver's; the HF engine starts ~17 CPU-seconds cheaper than vLLM on 2 cores
    extra = ["trainer.time_budget_minutes=0.0001", "trainer.test_freq=1000", "rollout.engine=hf"]
    loaded = _loaded(tiny_model_dir, train_file, tmp_path, "budget", 4, 1000, extra=extra)
    run_dir = tmp_path / "budget"
    assert train(loaded, tiny_model_dir, run_dir) == 0
    rows = [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0] and rows[0]["time/elapsed_s"] > 0.006
    assert "val/accuracy_greedy" in rows[0]  # the last step validates
    events = [json.loads(ln) for ln in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["event"] == "time_budget"] == [1]
    assert [s for s, _ in list_checkpoints(run_dir)] == [1]
