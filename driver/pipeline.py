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
(``inflight.pkl``), and a resumed run puts them back, so ``--resume`` continues bit for bit.
"""

from __future__ import annotations

import pickle
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from relay.data_proto import DataProto

INFLIGHT_FILE = "inflight.pkl"
Collected = tuple[DataProto, dict[str, float]]


def _done(value: Any) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


class RolloutPipeline:
    """The collects of the next ``k`` steps, queued ahead of the update, and the syncs between them."""

    def __init__(self, roles: Any, cfg: Any, prompts: Any, k: int, start_step: int) -> None:
        self.roles, self.cfg, self.prompts, self.k = roles, cfg, prompts, k
        self.next_step = start_step  # the next step whose collect is not queued yet
        self.pending: deque[tuple[int, Future]] = deque()
        self.syncs: deque[Future] = deque()
        self.last_sync: dict[str, float] = {}
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="relay-collect")

    def restore(self, path: Path) -> None:
        """Put back the collected batches a checkpoint stored (the steps right after it)."""
        for step, collected in pickle.loads(path.read_bytes()):
            if step != self.next_step:
                raise ValueError(f"{path}: holds the collect of step {step}, expected step {self.next_step}")
            self.pending.append((step, _done(collected)))
            self.next_step += 1

    def _collect(self, step: int) -> Collected:
        from driver.step import collect_phase
        from roles.recovery import with_recovery

        m: dict[str, float] = {"step": step}
        recovered: list[str] = []
        start = time.perf_counter()
        prompts = self.prompts.next_batch()
        more = None
        if self.cfg.algorithm.filter_groups.enable:
            from driver.dynamic_sampling import ExtraPrompts

            more = ExtraPrompts(self.prompts.next_batch)
        batch = with_recovery(
            lambda: collect_phase(self.roles, prompts, self.cfg, step, m, more),
            self.roles,
            int(self.cfg.trainer.role_restarts),
            recovered.append,
        )
        m["recovery/restarts"] = float(len(recovered))
        m["timing/collect"] = time.perf_counter() - start
        return batch, m

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
        t0 = time.perf_counter()
        batch, m = future.result()
        m = dict(m)
        m["timing/rollout_wait"] = time.perf_counter() - t0
        m.update(self._finished_syncs())
        return batch, m

    def _sync(self, weights_ref: Any, version: int) -> dict[str, float]:
        from roles import fanout
        from roles.recovery import with_recovery

        start = time.perf_counter()
        rollout, actor = with_recovery(
            lambda: fanout.load_weights(self.roles, weights_ref, version),
            self.roles,
            int(self.cfg.trainer.role_restarts),
            lambda role: None,
        )
        return {
            "sync/rollout_load_seconds": rollout,
            "sync/actor_load_seconds": actor,
            "sync/load_seconds": time.perf_counter() - start,
            "sync/version": float(version),
        }

    def queue_sync(self, weights_ref: Any, version: int) -> None:
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

    def inflight_files(self) -> dict[str, bytes]:
        """Drains, then the collected batches of the steps ahead as a checkpoint file (name -> bytes)."""
        self.drain()
        collected = [(step, future.result()) for step, future in self.pending]
        return {INFLIGHT_FILE: pickle.dumps(collected)}

    def close(self) -> None:
        """Cancel the collects not started; one still running ends when the roles stop (its result is unused)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def run_pipelined_step(roles: Any, pipe: RolloutPipeline, cfg: Any, step: int) -> Collected:
    """Step ``step`` of a pipelined run: take its collected batch, update, queue the sync; returns the batch
    and the step's metrics (the collect's, the update's and the ``offpolicy/*`` ones)."""
    from driver.step import reward_and_memory_metrics, update_phase

    t0 = time.perf_counter()
    batch, m = pipe.take(step)
    t1 = time.perf_counter()
    weights_ref = update_phase(roles, batch, cfg, m, free_synced=False)
    t2 = time.perf_counter()
    pipe.queue_sync(weights_ref, step + 1)
    reward_and_memory_metrics(m, batch)
    # How many updates the learner made since the weights of each sample. One collect runs between two
    # syncs, so every row of a step has the same version; the mean and max would show it if that changed.
    row_staleness = step - batch.batch["weights_version"].astype(np.float64)
    staleness = float(row_staleness.max())
    m["offpolicy/staleness_mean"], m["offpolicy/staleness_max"] = float(row_staleness.mean()), staleness
    if "actor/rollout_is_weight" in m:
        m["offpolicy/is_weight_mean"] = m["actor/rollout_is_weight"]
    if "logprob_gap/rollout_vs_learner_mean" in m:
        m[f"offpolicy/logprob_gap_mean_staleness_{int(staleness)}"] = m["logprob_gap/rollout_vs_learner_mean"]
    m["sync/seconds"] = m["sync/export_seconds"] + m.get("sync/load_seconds", 0.0)  # the newest finished load
    m["timing/update"] = t2 - t1
    m["timing/sync"] = time.perf_counter() - t2  # queued: the load runs in the collect thread
    m["timing/step"] = time.perf_counter() - t0
    m["timing/reward_share_of_step"] = m.get("timing/reward_compute", 0.0) / m["timing/step"]
    # What the main thread spent beyond waiting for the collect and the learner's own compute.
    busy = m["timing/rollout_wait"] + m.get("timing/update_compute", 0.0) + m["sync/export_seconds"]
    m["timing/driver_and_ray_overhead"] = max(0.0, m["timing/step"] - busy)
    return batch, m
