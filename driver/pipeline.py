"""Bounded-staleness pipeline (``trainer.max_staleness`` = k >= 1): the phases before the update of step
s+k (rollout, actor_ref || reward, advantage) run while the learner updates step s.

One background thread (a one-worker executor) runs, strictly in the order they were queued, every
collect and every weight sync; the main thread runs the updates. At step s the main thread queues the
collect of step s+k, takes the collect of step s (waiting only if it is not done yet), updates, and queues
the sync of the new weights. The executor's queue is therefore always

    ..., collect(s+k), sync(s+1), collect(s+k+1), sync(s+2), ...

so the collect of step t samples with the weights of update t-k-1 and is exactly k versions behind the
learner when step t trains on it (``offpolicy/staleness``), whatever the timing: a run is repeatable, and
the collect thread is the only one that touches the data cursor, the rollout's weights and
``roles.weights_ref`` while the pipeline runs. Drawing the prompts inside the collect also covers dynamic
sampling's extra passes.

``drain()`` waits for everything queued (before a checkpoint or a validation, which therefore see the
same state as the on-policy loop): a checkpoint stores the collected batches of the steps ahead
(``inflight/``: safetensors and JSON, :mod:`relay.checkpoint.batch_io`), and a resumed run puts them back, so
``--resume`` continues bit for bit.
"""

from __future__ import annotations

import json
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from driver import fanout
from driver.collect import collect_phase
from driver.dynamic_sampling import ExtraPrompts
from driver.launch import Roles, Weights
from driver.recovery import with_recovery
from driver.step import reward_and_memory_metrics, update_phase
from driver.timing import PhaseTimer, derived_timing_metrics
from relay.checkpoint.batch_io import load_batch, save_batch
from relay.config import RelayConfig
from relay.data.prompt_source import PromptSource
from relay.data_proto import DataProto

Collected = tuple[DataProto, dict[str, float]]


def _done(value: Any) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


def save_inflight(directory: Path, collected: list[tuple[int, Collected]]) -> None:
    """Write the collected batches of the steps ahead into ``directory`` (``steps.json`` lists them in order)."""
    directory.mkdir(parents=True, exist_ok=True)
    for step, (batch, metrics) in collected:
        save_batch(directory, f"step_{step:06d}", batch, metrics)
    (directory / "steps.json").write_text(json.dumps([step for step, _ in collected]))


def load_inflight(directory: Path) -> list[tuple[int, Collected]]:
    """The collected batches :func:`save_inflight` wrote, in step order."""
    steps = json.loads((directory / "steps.json").read_text())
    return [(int(step), load_batch(directory, f"step_{int(step):06d}")) for step in steps]


class RolloutPipeline:
    """The collects of the next ``k`` steps, queued ahead of the update, and the syncs between them."""

    def __init__(self, roles: Roles, cfg: RelayConfig, prompts: PromptSource, k: int, start_step: int) -> None:
        self.roles, self.cfg, self.prompts, self.k = roles, cfg, prompts, k
        self.next_step = start_step  # the next step whose collect is not queued yet
        self.pending: deque[tuple[int, Future]] = deque()
        self.syncs: deque[Future] = deque()
        self.last_sync: dict[str, float] = {}
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="relay-collect")

    def restore(self, directory: Path) -> None:
        """Put back the collected batches a checkpoint stored (the steps right after it)."""
        for step, collected in load_inflight(directory):
            if step != self.next_step:
                raise ValueError(f"{directory}: holds the collect of step {step}, expected step {self.next_step}")
            self.pending.append((step, _done(collected)))
            self.next_step += 1

    def _collect(self, step: int) -> Collected:
        recovered: list[str] = []
        timer = PhaseTimer(step)
        with timer.phase("timing/collect"):
            prompts = self.prompts.next_batch()
            more = ExtraPrompts(self.prompts.next_batch) if self.cfg.algorithm.filter_groups.enable else None
            collect = partial(collect_phase, self.roles, prompts, self.cfg, step, more)
            batch, metrics = with_recovery(collect, self.roles, self.cfg.trainer, recovered.append)
        return batch, {"step": step, **metrics, "recovery/restarts": float(len(recovered)), **timer.metrics()}

    def fill(self, step: int) -> None:
        """Queue the collects of every step up to ``step + k``, past the run's last step too: the queue order
        (hence each collect's weights) must not depend on where a run stops, or a run resumed from its final
        checkpoint would differ from one that never stopped. A final checkpoint stores those collects; without
        one they are cancelled or dropped at :meth:`close` (they overlap the last update)."""
        while self.next_step <= step + self.k:
            self.pending.append((self.next_step, self._pool.submit(self._collect, self.next_step)))
            self.next_step += 1

    def take(self, step: int) -> Collected:
        """Step ``step``'s collected batch and its metrics (queues the collects ahead first)."""
        self.fill(step)
        queued, future = self.pending.popleft()
        if queued != step:
            raise RuntimeError(f"pipeline out of order: asked for step {step}, next collected is {queued}")
        timer = PhaseTimer(step)
        with timer.phase("timing/rollout_wait"):
            batch, m = future.result()
        return batch, {**m, **timer.metrics(), **self._finished_syncs()}

    def _sync(self, weights_ref: Weights, version: int) -> dict[str, float]:
        timer = PhaseTimer(version - 1)
        with timer.phase("sync/load_seconds"):
            load = partial(fanout.load_weights, self.roles, weights_ref, version)
            rollout, actor = with_recovery(load, self.roles, self.cfg.trainer, lambda role: None)
        return {
            "sync/rollout_load_seconds": rollout,
            "sync/actor_load_seconds": actor,
            **timer.metrics(),
            "sync/version": float(version),
        }

    def queue_sync(self, weights_ref: Weights, version: int) -> None:
        """Load ``weights_ref`` into the rollout (and any actor copy) once the collects queued so far are done."""
        self.syncs.append(self._pool.submit(self._sync, weights_ref, version))

    def _finished_syncs(self) -> dict[str, float]:
        """The newest finished sync's figures (earlier ones are only checked for errors)."""
        while self.syncs and self.syncs[0].done():
            self.last_sync = self.syncs.popleft().result()
        return dict(self.last_sync)

    def drain(self) -> None:
        """Wait until every queued collect and sync is done (errors surface here)."""
        for _, future in self.pending:
            future.result()
        for future in self.syncs:
            future.result()
        self._finished_syncs()

    def save_inflight(self, directory: Path) -> None:
        """Drain, then store the collected batches of the steps ahead in ``directory`` (a checkpoint's
        ``inflight/``)."""
        self.drain()
        save_inflight(directory, [(step, future.result()) for step, future in self.pending])

    def close(self) -> None:
        """Cancel the collects not started; one still running ends when the roles stop (its result is unused)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def run_pipelined_step(roles: Roles, pipe: RolloutPipeline, cfg: RelayConfig, step: int) -> Collected:
    """Step ``step`` of a pipelined run: take its collected batch, update, queue the sync; returns the batch
    and the step's metrics (the collect's, the update's and the ``offpolicy/*`` ones)."""
    timer = PhaseTimer(step)
    with timer.phase("timing/step"):
        batch, m = pipe.take(step)
        weights, update_metrics = update_phase(roles, batch, cfg, step, free_synced=False)
        with timer.phase("timing/sync"):  # queued: the load runs in the collect thread
            pipe.queue_sync(weights, step + 1)
    m = {**m, **update_metrics}
    m.update(reward_and_memory_metrics(m, batch))
    m.update(staleness_metrics(m, batch, step))
    m.update(timer.metrics())
    # The newest finished load ran in the collect thread, beside this step's work: none of it is busy time here.
    sync_wall = m.get("sync/load_seconds", 0.0)
    m.update(derived_timing_metrics(m, collect_busy=m["timing/rollout_wait"], sync_wall=sync_wall, sync_busy=0.0))
    return batch, m


def staleness_metrics(m: dict[str, float], batch: DataProto, step: int) -> dict[str, float]:
    """How many updates the learner made since the weights of each sample (``offpolicy/staleness_*``), and the
    IS weight and log-prob gap beside it. One collect runs between two syncs, so every row of a step has the same
    version; the mean and max would show it if that changed."""
    row_staleness = step - batch.batch["weights_version"].astype(np.float64)
    staleness = float(row_staleness.max())
    out = {"offpolicy/staleness_mean": float(row_staleness.mean()), "offpolicy/staleness_max": staleness}
    if "actor/rollout_is_weight" in m:
        out["offpolicy/is_weight_mean"] = m["actor/rollout_is_weight"]
    if "logprob_gap/rollout_vs_learner_mean" in m:
        out[f"offpolicy/logprob_gap_mean_staleness_{int(staleness)}"] = m["logprob_gap/rollout_vs_learner_mean"]
    return out
