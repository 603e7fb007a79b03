"""The bounded-staleness pipeline (``trainer.max_staleness``).

The queue order is checked with a pipeline whose collect and sync only record weight versions (fast, no
Ray); then real runs of the tiny model check staleness, the IS weights and that ``--resume`` of a k=1 run
continues bit for bit like a run that never stopped. The runs earn the toy reward (a share of low token ids),
so every update moves the weights and samples one update old are measurably off-policy.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks.harness.toy_reward import TOY_REWARD_OVERRIDES
from driver.pipeline import RolloutPipeline
from relay.checkpoint import checkpoint_path
from relay.checkpoint.store import INFLIGHT_DIR
from relay.config import LoadedConfig
from relay.data_proto import DataProto
from relay.run.digest import computed_metrics
from tests.tiny_runs import metric_rows, run_config
from trainer import main, train


class VersionOnlyPipeline(RolloutPipeline):
    """The real queueing, with a collect that reports the weights version it saw and a sync that sets it."""

    def __init__(self, k: int, collect_s: float, start_version: int = 0) -> None:
        super().__init__(roles=None, cfg=None, prompts=None, k=k, start_step=start_version, kl_control=None)
        self.version, self.collect_s = start_version, collect_s

    def _collect(self, step: int):
        seen = self.version
        time.sleep(self.collect_s)
        rows = DataProto.from_dict(
            batch={"weights_version": np.full(2, seen, np.int64)}, non_tensor={"uid": ["a", "a"]}
        )
        return rows, {"step": step, "offpolicy/weights_version": float(seen)}

    def _sync(self, weights_ref, version: int):
        self.version = version
        return {"sync/version": float(version)}


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("collect_s", [0.0, 0.02])  # collects faster / slower than the "update"
def test_every_collect_is_exactly_k_versions_behind(k: int, collect_s: float) -> None:
    pipe = VersionOnlyPipeline(k, collect_s)
    staleness, loads = [], []
    for step in range(8):
        _, m = pipe.take(step)
        time.sleep(0.01)  # the update
        pipe.queue_sync(None, step + 1)
        staleness.append(step - m["offpolicy/weights_version"])
        loads.append(m.get("sync/version", 0.0) - m["offpolicy/weights_version"])
    pipe.close()
    assert staleness == [min(step, k) for step in range(8)]
    # a row's load figures are those of the load before its collect, whatever the timing: the version sampled
    assert loads == [0.0] * 8


def test_drain_then_restore_continues_the_same_queue(tmp_path: Path) -> None:
    first = VersionOnlyPipeline(2, 0.0)
    for step in range(3):
        first.take(step)
        first.queue_sync(None, step + 1)
    first.save_inflight(tmp_path / INFLIGHT_DIR)
    first.close()
    assert not [p for p in (tmp_path / INFLIGHT_DIR).iterdir() if p.suffix not in (".json", ".safetensors")]
    resumed = VersionOnlyPipeline(2, 0.0, start_version=3)
    resumed.restore(tmp_path / INFLIGHT_DIR)
    assert [s for s, _ in resumed.pending] == [3, 4] and resumed.next_step == 5
    rows, m = resumed.take(3)
    assert m["offpolicy/weights_version"] == 1.0  # collected before the checkpoint, two updates ago
    np.testing.assert_array_equal(rows.batch["weights_version"], [1, 1])
    assert list(rows.non_tensor["uid"]) == ["a", "a"]
    assert m["sync/version"] == 1.0  # the load before that collect, kept with the batch
    resumed.queue_sync(None, 4)
    resumed.take(4)
    resumed.queue_sync(None, 5)
    # step 5's collect was queued right after the checkpoint's last load (version 3), as in a run that never stopped:
    # the checkpoint kept that load's figures
    _, m = resumed.take(5)
    assert m["offpolicy/weights_version"] == m["sync/version"] == 3.0
    resumed.close()


class CountingPrompts:
    """A data cursor over 4 prompts drawn 2 at a time: ``epochs_done`` is the complete passes drawn so far."""

    def __init__(self) -> None:
        self.drawn = 0

    def next_batch(self, *_: int) -> int:
        self.drawn += 2
        return self.drawn

    @property
    def epochs_done(self) -> int:
        return self.drawn // 4


@pytest.mark.parametrize("collect_s", [0.0, 0.03])  # the next collect draws during / after the "update"
def test_a_rows_epochs_done_is_the_cursor_after_its_own_collect(monkeypatch, collect_s: float) -> None:
    def collect_phase(roles, prompts, cfg, step, kl_control, more, observe):
        time.sleep(collect_s)
        return DataProto.from_dict(batch={"x": np.zeros(2)}, non_tensor={"uid": ["a", "a"]}), {}

    monkeypatch.setattr("driver.pipeline.collect_phase", collect_phase)
    cfg = SimpleNamespace(
        algorithm=SimpleNamespace(filter_groups=SimpleNamespace(enable=False)),
        data=SimpleNamespace(revisit_unsolved=SimpleNamespace(enable=False)),
    )
    roles = SimpleNamespace(restarted=[])
    pipe = RolloutPipeline(roles, cfg, CountingPrompts(), k=1, start_step=0, kl_control=None)
    pipe._sync = lambda weights, version: {}
    epochs = []
    for step in range(6):
        _, m = pipe.take(step)
        time.sleep(0.015)  # the update, while the collect of step + 1 draws its prompts
        pipe.queue_sync(None, step + 1)
        epochs.append(m["data/epochs_done"])
    pipe.close()
    assert epochs == [0.0, 1.0, 1.0, 2.0, 2.0, 3.0]  # after steps 0..5's own draws, whatever the timing


# metrics that depend only on the data, the samples and the weights
DETERMINISTIC = (
    "reward/mean",
    "response/length_mean",
    "actor/loss",
    "actor/kl",
    "actor/grad_norm",
    "actor/rollout_is_weight",
    "logprob_gap/rollout_vs_learner_mean",
    "advantage/abs_mean",
    "offpolicy/staleness_mean",
)


def _loaded(tiny_model_dir: Path, out: Path, name: str, steps: int, resume: Path | None = None) -> LoadedConfig:
    overrides = [
        "rollout.engine=hf",
        "data.max_response_length=16",
        "rollout.n=2",
        "trainer.max_staleness=1",
        "algorithm.rollout_is=tis",
        *TOY_REWARD_OVERRIDES,  # a reward the tiny model earns: every update moves the weights
        "trainer.save_freq=2",
        "trainer.keep_checkpoints=0",
        "trainer.export_hf=false",
        f"trainer.output_dir={out}",
        f"trainer.run_name={name}",
    ]
    return run_config(tiny_model_dir, steps, overrides, resume)


def test_a_k1_run_is_one_step_off_policy_and_resumes_exactly(ray_session, tiny_model_dir, tmp_path, capsys) -> None:
    run_a, run_b = tmp_path / "a", tmp_path / "b"
    assert train(_loaded(tiny_model_dir, tmp_path, "a", 4), tiny_model_dir, run_a) == 0
    a = metric_rows(run_a)
    assert [a[s]["offpolicy/staleness_mean"] for s in range(4)] == [0.0, 1.0, 1.0, 1.0]
    assert abs(a[0]["offpolicy/is_weight_mean"] - 1.0) < 1e-3  # on-policy: rollout and learner agree
    # samples one update old differ from the learner by far more than on-policy ones, whose gap is rounding
    # (measured: 4.7e-7 on-policy, 0.03-0.05 one update old at lr 1e-3)
    stale_gap = min(a[s]["logprob_gap/rollout_vs_learner_mean"] for s in (1, 2, 3))
    assert a[0]["logprob_gap/rollout_vs_learner_mean"] < 1e-4 and stale_gap > 1e-3
    assert a[1]["offpolicy/logprob_gap_mean_staleness_1"] == a[1]["logprob_gap/rollout_vs_learner_mean"]
    assert a[3]["actor/optimizer_steps"] == 4.0

    assert train(_loaded(tiny_model_dir, tmp_path, "b", 2), tiny_model_dir, run_b) == 0
    assert (checkpoint_path(run_b, 2) / INFLIGHT_DIR).is_dir()  # step 2's collect, sampled before the stop
    # resuming it on-policy would silently drop those samples: refused before Ray starts
    code = main(["--resume", str(run_b), "--set", "trainer.max_staleness=0", "--set", "trainer.total_training_steps=4"])
    assert code == 2 and "resume it with that trainer.max_staleness" in capsys.readouterr().err
    resumed = _loaded(tiny_model_dir, tmp_path, "b", 4, resume=run_b)
    assert train(resumed, tiny_model_dir, run_b, checkpoint_path(run_b, 2)) == 0
    b = metric_rows(run_b)
    assert sorted(b) == [0, 1, 2, 3]
    for step in range(4):
        got = {k: b[step].get(k) for k in DETERMINISTIC}
        assert got == {k: a[step].get(k) for k in DETERMINISTIC}, step
    # every computed figure too (the load figures of the first step after the resume among them: the checkpoint keeps
    # the last load's), as the fault-injection campaigns compare runs
    assert computed_metrics(run_b) == computed_metrics(run_a)
